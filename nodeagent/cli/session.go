package cli

import (
	"cmp"
	"context"
	"crypto/sha1" // #nosec G505 -- RFC 9562 UUIDv5 is defined with SHA-1; not a security use.
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/nodeagent/adapter"
)

const (
	maxSessionIDLen = 128 // base64url of 128 bytes (171) fits NAME_MAX
	stateFileName   = "state.json"
	stateDirPerm    = 0o700
	stateFilePerm   = 0o600
)

// sessionState is what persists of a session between runs (and Node
// restarts), in <store>/cli/<instance>/sessions/<base64url(id)>/state.json.
type sessionState struct {
	ID string `json:"id"`
	// The CLI's own session id, captured with session_id_regex.
	UpstreamID string `json:"upstream_id,omitempty"`
	// Successful runs; a failed first run does not establish the session.
	Runs int64 `json:"runs"`
	// First runs that started the CLI and failed. Each gives
	// {session_uuid} a fresh value: the CLI may have registered the one
	// it was given before failing, and a CLI that creates sessions by id
	// refuses one it already has (claude's --session-id: "already in
	// use"), which would fail every later run of the session.
	FailedStarts int64 `json:"failed_starts,omitempty"`
	CreatedUnix  int64 `json:"created_unix"`
	LastUsedUnix int64 `json:"last_used_unix"`
}

// established reports whether the next run continues the session. With
// session_id_regex configured, a session is established only once the CLI's
// own id is known: resuming with anything else would fail upstream.
func (st *sessionState) established(needUpstream bool) bool {
	return st.Runs > 0 && (!needUpstream || st.UpstreamID != "")
}

// session is the in-memory side of a session. Runs of one session are
// serialized by sem; the other fields are guarded by instance.mu.
// sessionbound.go bounds how many there are.
type session struct {
	id  string
	dir string
	// Capacity 1: holding the slot means owning the session's state (and
	// being its one running process).
	sem chan struct{}
	// Closed once TerminateSession has removed the session.
	gone chan struct{}

	terminated bool
	persisted  bool // state was written at least once, or found at load
	// unreadable: found at load with a state file that could not be read
	// (torn by a disk fault, edited, another id's). Its directory counts
	// against max_sessions and is evicted like any other, but it is not
	// listed until a run of its id writes its state afresh.
	unreadable bool
	stopRun    chan struct{} // non-nil while a process runs; closed to terminate it
	lastUsed   int64
	// Runs that hold the slot or wait for it; eviction passes a session
	// with users by.
	users int
	// Neighbours in instance.idle while users is 0 and not terminated;
	// nil otherwise.
	prev, next *session
}

func (a *instance) newSession(id string) *session {
	return &session{
		id:   id,
		dir:  filepath.Join(a.sessionsDir(), sessionDirName(id)),
		sem:  make(chan struct{}, 1),
		gone: make(chan struct{}),
	}
}

func (a *instance) sessionsDir() string {
	return filepath.Join(a.storeDir, Type, a.name, "sessions")
}

// sessionDirName encodes a session id into a file name: base64url has no
// separators or dots, so no id can name another directory.
func sessionDirName(id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(id))
}

// validateSessionID rejects ids that could not be stored safely or that look
// like paths, so that a mistake surfaces instead of being encoded away.
func validateSessionID(id string) error {
	if len(id) > maxSessionIDLen {
		return invalidRequest("session id is longer than %d bytes", maxSessionIDLen)
	}
	if !utf8.ValidString(id) {
		return invalidRequest("session id is not valid UTF-8")
	}
	if id == "." || id == ".." || strings.ContainsAny(id, `/\`) {
		return invalidRequest("session id must not be a path")
	}
	if strings.IndexFunc(id, unicode.IsControl) >= 0 {
		return invalidRequest("session id contains control characters")
	}
	return nil
}

// Test seams, nil in production: a TerminateSession landing in the
// windows they mark cannot be placed there from outside. acquiredHook runs
// when acquireSession has taken a session's slot, before it looks whether
// the session was terminated meanwhile; registerHook runs as registerRun
// begins (after acquireSession returned).
var acquiredHook, registerHook func(*session)

// stateLstatHook: see readStateBytes.
var stateLstatHook func(name string)

// acquireSession waits, respecting ctx, until the caller is the only run of
// session id, and returns it. Release with releaseSession.
func (a *instance) acquireSession(ctx context.Context, id string) (*session, error) {
	a.loaded.Do(a.loadSessions)
	for {
		a.mu.Lock()
		s, evicted, err := a.useLocked(id)
		terminated := err == nil && s.terminated
		a.mu.Unlock()
		a.removeEvicted(evicted)
		if err != nil {
			return nil, err
		}
		if terminated {
			// Wait for the removal to finish, then start afresh.
			select {
			case <-s.gone:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("cli: wait for session: %w", ctx.Err())
			}
		}
		select {
		case s.sem <- struct{}{}:
		case <-ctx.Done():
			a.done(s)
			return nil, fmt.Errorf("cli: wait for session: %w", ctx.Err())
		}
		if acquiredHook != nil {
			acquiredHook(s)
		}
		a.mu.Lock()
		terminated = s.terminated
		if !terminated {
			s.lastUsed = time.Now().Unix()
		}
		a.mu.Unlock()
		if !terminated {
			return s, nil
		}
		<-s.sem // terminated while we waited: let TerminateSession proceed
		a.done(s)
	}
}

// releaseSession gives back the slot acquireSession took. The slot is free
// before the run stops counting as a user, so that eviction, which picks
// only sessions without users, never waits for it.
func (a *instance) releaseSession(s *session) {
	<-s.sem
	a.done(s)
}

// registerRun marks the session's process as running and returns the channel
// TerminateSession closes to stop it. ok is false if the session was
// terminated meanwhile.
func (a *instance) registerRun(s *session) (stop chan struct{}, ok bool) {
	if registerHook != nil {
		registerHook(s)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if s.terminated {
		return nil, false
	}
	s.stopRun = make(chan struct{})
	return s.stopRun, true
}

func (a *instance) unregisterRun(s *session, persisted bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s.stopRun = nil
	s.lastUsed = time.Now().Unix()
	s.persisted = s.persisted || persisted
	s.unreadable = s.unreadable && !persisted
}

// TerminateSession stops the session's running process (SIGTERM to its
// group, SIGKILL after the grace), waits for the run to finish, and removes
// the session's state. Unknown (and invalid) ids are not an error.
func (a *instance) TerminateSession(id string) error {
	if id == "" || validateSessionID(id) != nil {
		return nil // no such session can exist
	}
	a.loaded.Do(a.loadSessions)
	a.mu.Lock()
	s := a.sessions[id]
	switch {
	case s == nil:
		// Not live in memory, but state may persist from an earlier Node
		// process. Registering the session blocks new runs of this id
		// until the removal is done; it is not live, so it does not
		// count against max_sessions.
		s = a.newSession(id)
		s.terminated = true
		a.sessions[id] = s
	case s.terminated:
		a.mu.Unlock()
		<-s.gone // a concurrent TerminateSession (or eviction) does the work
		return nil
	default:
		a.retireLocked(s)
	}
	if s.stopRun != nil {
		close(s.stopRun)
	}
	a.mu.Unlock()

	// The running run, now stopping, holds the slot until its process is
	// gone and its state written; waiters see terminated and step aside.
	s.sem <- struct{}{}
	err := os.RemoveAll(s.dir)
	a.finishRemoval(s)
	if err != nil {
		return fmt.Errorf("cli: remove session state: %w", err)
	}
	return nil
}

// Sessions lists the live sessions, by id: those with persisted state or a
// running process.
func (a *instance) Sessions() []adapter.SessionInfo {
	a.loaded.Do(a.loadSessions)
	out := a.sessionInfos()
	// Sorted after mu is given back: every run's acquire and release
	// takes mu, and at max_sessions in the hundred thousands the sort
	// would hold them for tens of milliseconds.
	slices.SortFunc(out, func(x, y adapter.SessionInfo) int { return strings.Compare(x.ID, y.ID) })
	return out
}

// sessionInfos copies what Sessions lists, in map order.
func (a *instance) sessionInfos() []adapter.SessionInfo {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]adapter.SessionInfo, 0, len(a.sessions))
	for _, s := range a.sessions {
		if s.terminated || (!s.persisted && s.stopRun == nil) || (s.unreadable && s.stopRun == nil) {
			continue
		}
		info := adapter.SessionInfo{ID: s.id, Adapter: a.name, LastUsedUnix: s.lastUsed}
		if s.stopRun != nil {
			info.Running = 1
		}
		out = append(out, info)
	}
	return out
}

// loadSessions registers the sessions persisted by an earlier Node process,
// so they are listed and can be terminated. Session directories without a
// state file, holding at most leftovers of a state write, are removed
// (removeStateless). One whose state file cannot be read (corrupt, too
// large, or no regular file of its own: readStateBytes) is kept (the
// warning names something to look at), unlisted but counted against
// max_sessions as the least recently used: it takes room on disk as any
// session does, and is the first evicted when a new session needs room
// (nothing of it could be resumed: a run of its id starts it afresh,
// loadState). Other entries (not a session's name) are skipped.
// Those over max_sessions (the store may have been filled under a higher
// bound) are removed, least recently used first. Run once
// (instance.loaded), before any other use of the sessions.
func (a *instance) loadSessions() {
	entries, err := os.ReadDir(a.sessionsDir())
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			a.log.Warn("cli: list persisted sessions", zap.Error(err))
		}
		return
	}
	var loaded, unreadable []*session
	var stateless, strayFailed int
	var strayErr error
	for _, e := range entries {
		raw, err := base64.RawURLEncoding.DecodeString(e.Name())
		if !e.IsDir() || err != nil || validateSessionID(string(raw)) != nil || len(raw) == 0 {
			continue
		}
		s := a.newSession(string(raw))
		st, err := readState(s.dir, s.id)
		if errors.Is(err, fs.ErrNotExist) {
			// No state: left by a write that failed or a crash. It
			// holds no session (a run of its id would start afresh),
			// and kept it would count against no bound.
			removed, rerr := removeStateless(s.dir)
			if removed {
				stateless++
				continue
			}
			if rerr != nil {
				strayFailed++
				strayErr = rerr
				continue
			}
			// It holds more than leftovers of a write (removeStateless):
			// left alone, and no session.
			a.log.Warn("cli: skip persisted session", zap.String("dir", e.Name()), zap.Error(err))
			continue
		}
		s.persisted = true
		if err != nil {
			a.log.Warn("cli: skip persisted session", zap.String("dir", e.Name()), zap.Error(err),
				zap.Bool("counts_against_max_sessions", true))
			s.unreadable = true
			unreadable = append(unreadable, s)
			continue
		}
		s.lastUsed = st.LastUsedUnix
		loaded = append(loaded, s)
	}
	if stateless > 0 {
		a.log.Info("cli: removed session directories without state", zap.Int("count", stateless))
	}
	if strayFailed > 0 {
		a.log.Warn("cli: remove session directories without state", zap.Int("count", strayFailed), zap.Error(strayErr))
	}
	// Oldest first: trimming takes from the front, and pushing the rest
	// in this order leaves the most recently used at the front of idle.
	slices.SortFunc(loaded, func(x, y *session) int {
		return cmp.Or(cmp.Compare(x.lastUsed, y.lastUsed), strings.Compare(x.id, y.id))
	})
	if over := len(loaded) - a.config().maxSessions; over > 0 {
		a.trimLoaded(loaded[:over])
		loaded = loaded[over:]
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	// The unreadable first: at the back of idle, the first evicted.
	// They are not trimmed here, so the store may hold more than
	// max_sessions until the next new session makes room.
	for _, s := range append(unreadable, loaded...) {
		a.sessions[s.id] = s
		a.live++
		a.idlePushLocked(s)
	}
}

// trimLoaded removes the state of persisted sessions over max_sessions. No
// run can use them yet: loadSessions runs before any.
func (a *instance) trimLoaded(excess []*session) {
	var failed int
	var lastErr error
	for _, s := range excess {
		if err := os.RemoveAll(s.dir); err != nil {
			failed++
			lastErr = err
		}
	}
	if removed := len(excess) - failed; removed > 0 {
		a.log.Warn("cli: removed persisted sessions over max_sessions, least recently used first",
			zap.Int("count", removed), zap.Int("max_sessions", a.config().maxSessions))
	}
	if failed > 0 {
		a.log.Warn("cli: remove persisted sessions over max_sessions", zap.Int("count", failed), zap.Error(lastErr))
	}
}

// loadState returns the session's persisted state, or a fresh one. A corrupt
// state file is logged and replaced: the worst outcome is a new upstream
// session instead of a continued one.
func (a *instance) loadState(s *session) sessionState {
	st, err := readState(s.dir, s.id)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		a.log.Warn("cli: discard unreadable session state", zap.String("session_id", s.id), zap.Error(err))
	}
	if err != nil {
		return sessionState{ID: s.id}
	}
	if st.UpstreamID != "" && plausibleID(st.UpstreamID) == "" {
		// Written before captured ids were checked: it could become an
		// option of the CLI. Without it the session is not established
		// (with session_id_regex) and starts afresh.
		a.log.Warn("cli: discard implausible persisted upstream session id", zap.String("session_id", s.id))
		st.UpstreamID = ""
	}
	return st
}

// maxStateBytes bounds what readState reads of a state file. A state
// holds an id of at most maxSessionIDLen bytes, a captured id of at most
// 256 (plausibleID), each at most six bytes a byte in JSON, and a few
// numbers: under 3 KiB.
const maxStateBytes = 64 << 10

var (
	// errStateNotRegular: the state file is not a regular file of the
	// session's own (a FIFO, a device, a directory, a symlink).
	errStateNotRegular = errors.New("session state is not a regular file")
	// errStateTooLarge: the state file holds more than maxStateBytes.
	errStateTooLarge = errors.New("session state is too large")
)

func readState(dir, id string) (sessionState, error) {
	var st sessionState
	b, err := readStateBytes(filepath.Join(dir, stateFileName))
	if err != nil {
		return st, fmt.Errorf("read session state: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("decode session state: %w", err)
	}
	if st.ID != id {
		return st, errors.New("session state belongs to another id")
	}
	return st, nil
}

// readStateBytes reads the state file at name, which writeState makes a
// regular file of the session's own. Anything else in its place, left by
// hand or by another program with access to the store, is refused without
// being read: a FIFO would block the open (and with it the loading of
// every session, or a run), and a symlink could make another file, out of
// the store, the session's state. Lstat refuses those without opening
// them; the open does not block (O_NONBLOCK), refuses a symlink put in
// its place in between (O_NOFOLLOW, where the system has it: its target,
// out of the store, is never opened) and must reach the file Lstat saw,
// should the name be replaced by another file.
//
// stateLstatHook, a test seam nil in production, runs between the Lstat
// and the open: a name replaced there cannot be placed from outside.
func readStateBytes(name string) ([]byte, error) {
	lfi, err := os.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !lfi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w (%s)", errStateNotRegular, lfi.Mode().Type())
	}
	if stateLstatHook != nil {
		stateLstatHook(name)
	}
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|oNoFollow, 0)
	if err != nil {
		if isNoFollowRefusal(err) {
			return nil, fmt.Errorf("%w (replaced by a symlink while opened)", errStateNotRegular)
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || !os.SameFile(lfi, fi) {
		return nil, fmt.Errorf("%w (replaced while opened)", errStateNotRegular)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxStateBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxStateBytes {
		return nil, fmt.Errorf("%w (over %d bytes)", errStateTooLarge, maxStateBytes)
	}
	return b, nil
}

// writeState replaces the state file atomically, so a crash never leaves a
// torn file behind. A write that fails removes the session directory if it
// created it: a directory without state holds no session, and left behind
// it would count against no bound (loadSessions removes those it finds).
func writeState(dir string, st *sessionState) (err error) {
	created, err := makeStateDir(dir)
	if err != nil {
		return err
	}
	if created {
		defer func() {
			if err == nil {
				return
			}
			// Remove, not RemoveAll: the directory is empty once the
			// temporary file is gone, and nothing else may go with it.
			if rerr := os.Remove(dir); rerr != nil {
				err = errors.Join(err, fmt.Errorf("remove session dir: %w", rerr))
			}
		}()
	}
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode session state: %w", err)
	}
	f, err := os.CreateTemp(dir, stateFileName+".*")
	if err != nil {
		return fmt.Errorf("create session state: %w", err)
	}
	tmp := f.Name()
	_, werr := f.Write(b)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write session state: %w", err)
	}
	if err := os.Chmod(tmp, stateFilePerm); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write session state: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, stateFileName)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write session state: %w", err)
	}
	return nil
}

// makeStateDir creates the session directory dir (and the directories
// above it) and reports whether it created dir itself. An existing dir,
// or a file in its way (the write then fails), is not its to remove.
func makeStateDir(dir string) (created bool, err error) {
	if err := os.MkdirAll(filepath.Dir(dir), stateDirPerm); err != nil {
		return false, fmt.Errorf("create session dir: %w", err)
	}
	switch err := os.Mkdir(dir, stateDirPerm); {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrExist):
		return false, nil
	default:
		return false, fmt.Errorf("create session dir: %w", err)
	}
}

// maxStatelessEntries bounds what loadSessions reads of a session
// directory without a state file: a write leaves at most a temporary file
// or two behind, and a directory holding more is not its leftover.
const maxStatelessEntries = 8

// removeStateless removes dir, a session directory without a state file,
// if it holds nothing but temporary files of state writes (a crash
// between creating the directory or the file and the rename). It reports
// whether it did; anything else in dir keeps it.
func removeStateless(dir string) (bool, error) {
	d, err := os.Open(dir)
	if err != nil {
		return false, fmt.Errorf("open session dir: %w", err)
	}
	entries, err := d.ReadDir(maxStatelessEntries + 1)
	d.Close()
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("list session dir: %w", err)
	}
	if len(entries) > maxStatelessEntries {
		return false, nil
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), stateFileName+".") {
			return false, nil
		}
	}
	for _, e := range entries {
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return false, fmt.Errorf("remove session dir: %w", err)
		}
	}
	if err := os.Remove(dir); err != nil {
		return false, fmt.Errorf("remove session dir: %w", err)
	}
	return true, nil
}

// uuidNamespace is the RFC 9562 namespace of {session_uuid} values (a fixed
// random UUID: changing it would orphan every upstream session).
var uuidNamespace = [16]byte{0x6b, 0x1f, 0x3c, 0x52, 0x9a, 0x0e, 0x4d, 0x8b, 0xa1, 0x57, 0x2e, 0xc4, 0x90, 0x3d, 0x71, 0xf6}

// sessionUUID derives a stable UUIDv5 from the instance name, the iop
// session id and the session's failed starts (sessionState.FailedStarts),
// for CLIs that only accept UUIDs as session ids (claude's --session-id).
// The instance name keeps two instances sharing a CLI home from colliding.
func sessionUUID(instance, id string, failedStarts int64) string {
	h := sha1.New() // #nosec G401 -- UUIDv5, see the import.
	h.Write(uuidNamespace[:])
	h.Write([]byte(instance))
	h.Write([]byte{0})
	h.Write([]byte(id))
	if failedStarts > 0 {
		// None: the value sessions had before failed starts were counted.
		fmt.Fprintf(h, "\x00%d", failedStarts)
	}
	u := h.Sum(nil)[:16]
	u[6] = (u[6] & 0x0f) | 0x50 // version 5
	u[8] = (u[8] & 0x3f) | 0x80 // RFC 9562 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// expandArgs substitutes the session placeholders in extra argv elements.
func expandArgs(args []string, ref, uuid string) []string {
	r := strings.NewReplacer("{session}", ref, "{session_uuid}", uuid)
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = r.Replace(a)
	}
	return out
}
