//go:build unix

package cli

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// boundSettings makes a session's first run print "args:new" and later
// runs "args:resume", so a test sees whether a run continued its session.
func boundSettings(maxSessions int) map[string]string {
	return map[string]string{
		SettingSessionArgs: `["new"]`,
		SettingResumeArgs:  `["resume"]`,
		SettingMaxSessions: fmt.Sprint(maxSessions),
	}
}

// storedSessions lists the ids whose state directories exist, sorted.
func storedSessions(t *testing.T, inst *instance) []string {
	t.Helper()
	entries, err := os.ReadDir(inst.sessionsDir())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range entries {
		ids = append(ids, decodeDirName(t, e.Name()))
	}
	slices.Sort(ids)
	return ids
}

func decodeDirName(t *testing.T, name string) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(name)
	if err != nil {
		t.Fatalf("session dir %q: %v", name, err)
	}
	return string(raw)
}

func listedSessions(inst *instance) []string {
	var ids []string
	for _, s := range inst.Sessions() {
		ids = append(ids, s.ID)
	}
	return ids
}

func mustRun(t *testing.T, inst *instance, sid string) string {
	t.Helper()
	got, err := runSync(t, inst, sessionRun(t, sid, "user", "q"))
	if err != nil {
		t.Fatalf("run of session %q: %v", sid, err)
	}
	return got
}

func TestSessionsBoundedOneAfterAnother(t *testing.T) {
	r := newRig(t)
	inst := r.instance(t, []string{script(t, argsScript)}, boundSettings(3))
	var ids []string
	for i := range 10 {
		sid := fmt.Sprintf("s-%02d", i)
		ids = append(ids, sid)
		mustRun(t, inst, sid)
		want := ids[max(0, len(ids)-3):]
		if got := storedSessions(t, inst); !slices.Equal(got, want) {
			t.Fatalf("after %d sessions: stored %q, want %q", i+1, got, want)
		}
		if got := listedSessions(inst); !slices.Equal(got, want) {
			t.Fatalf("after %d sessions: listed %q, want %q", i+1, got, want)
		}
	}
	inst.mu.Lock()
	defer inst.mu.Unlock()
	if len(inst.sessions) != 3 || inst.live != 3 {
		t.Fatalf("%d sessions in memory (%d live), want 3", len(inst.sessions), inst.live)
	}
}

// The session evicted is the least recently used one, not the oldest: its
// state is removed, and a later run of its id starts a fresh session.
func TestLeastRecentlyUsedSessionIsEvicted(t *testing.T) {
	r := newRig(t)
	inst := r.instance(t, []string{script(t, argsScript)}, boundSettings(2))
	mustRun(t, inst, "a")
	mustRun(t, inst, "b")
	if got := mustRun(t, inst, "a"); got != "args:resume\nq" {
		t.Fatalf("second run of a = %q, want a continuation", got)
	}
	mustRun(t, inst, "c") // evicts b
	if got, want := storedSessions(t, inst), []string{"a", "c"}; !slices.Equal(got, want) {
		t.Fatalf("stored %q, want %q", got, want)
	}
	if got := mustRun(t, inst, "b"); got != "args:new\nq" {
		t.Fatalf("run of evicted b = %q, want a fresh session", got)
	}
	// b came back evicting a, the least recently used now; c continues.
	if got := mustRun(t, inst, "c"); got != "args:resume\nq" {
		t.Fatalf("run of c = %q, want a continuation", got)
	}
	if got, want := storedSessions(t, inst), []string{"b", "c"}; !slices.Equal(got, want) {
		t.Fatalf("stored %q, want %q", got, want)
	}
}

// blockingScript, when its prompt is "block", makes a FIFO of its own in
// dir, prints its path and waits for a line on it; either way it then
// prints its arguments.
func blockingScript(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	return script(t, `p=$(cat)
if [ "$p" = block ]; then f=`+sq(dir)+`/$$; mkfifo "$f"; echo "$f"; read x < "$f"; fi
printf 'args:%s\n' "$*"
`)
}

// startBlocked starts a run of session sid that blocks until its FIFO gets
// a line (unblock).
func startBlocked(t *testing.T, inst *instance, sid string) (ch <-chan outcome, sink *chanSink, fifo string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	t.Cleanup(cancel)
	sink = newChanSink()
	ch = runAsync(ctx, inst, sessionRun(t, sid, "user", "block"), sink)
	fifo = strings.TrimSuffix(recvDelta(t, sink), "\n")
	if !filepath.IsAbs(fifo) {
		t.Fatalf("first delta = %q, want the FIFO's path", fifo)
	}
	return ch, sink, fifo
}

func unblock(t *testing.T, fifo string) {
	t.Helper()
	if err := os.WriteFile(fifo, []byte("go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A session whose process runs is passed by: the idle one is evicted.
func TestRunningSessionIsNotEvicted(t *testing.T) {
	r := newRig(t)
	inst := r.instance(t, []string{blockingScript(t)}, boundSettings(2))
	mustRun(t, inst, "a")
	mustRun(t, inst, "b")
	// a, the least recently used, runs again; a new session must evict b.
	ch, sink, fifo := startBlocked(t, inst, "a")
	mustRun(t, inst, "c")
	if got, want := storedSessions(t, inst), []string{"a", "c"}; !slices.Equal(got, want) {
		t.Fatalf("stored %q, want %q", got, want)
	}
	unblock(t, fifo)
	if o := await(t, ch); o.err != nil {
		t.Fatalf("running session's run: %v", o.err)
	}
	if got := sink.rest(); got != "args:resume\n" {
		t.Fatalf("running session's run = %q, want a continuation", got)
	}
	if st := readStateFile(t, inst, "a"); st.Runs != 2 {
		t.Fatalf("state of a = %+v, want 2 runs", st)
	}
}

// With every session held by a run, a new session is refused at once as
// over capacity; the held sessions and their runs are untouched.
func TestNewSessionRefusedWhileAllSessionsRun(t *testing.T) {
	r := newRig(t)
	inst := r.instance(t, []string{blockingScript(t)}, boundSettings(2))
	chA, _, fifoA := startBlocked(t, inst, "a")
	chB, _, fifoB := startBlocked(t, inst, "b")
	// A second run of a waits for a's slot: it holds the session too.
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	chA2 := runAsync(ctx, inst, sessionRun(t, "a", "user", "q"), newChanSink())

	_, err := runSync(t, inst, sessionRun(t, "c", "user", "q"))
	if errCode(err) != adapter.CodeCapacityExceeded || !errors.Is(err, errSessionsInUse) {
		t.Fatalf("run of a new session: err = %v, want capacity exceeded", err)
	}
	if got := listedSessions(inst); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("listed %q, want a and b", got)
	}
	unblock(t, fifoA)
	unblock(t, fifoB)
	for i, ch := range []<-chan outcome{chA, chB, chA2} {
		if o := await(t, ch); o.err != nil {
			t.Fatalf("run %d: %v", i, o.err)
		}
	}
	if st := readStateFile(t, inst, "a"); st.Runs != 2 {
		t.Fatalf("state of a = %+v, want 2 runs", st)
	}
	if got := mustRun(t, inst, "c"); got != "args:new\n" {
		t.Fatalf("run of c once a session is free = %q", got)
	}
}

// A run that has found its session but not yet started its process (here:
// has just taken the slot) holds the session: a new session arriving then
// evicts another one.
func TestSessionAboutToRunIsNotEvicted(t *testing.T) {
	r := newRig(t)
	inst := r.instance(t, []string{script(t, argsScript)}, boundSettings(2))
	mustRun(t, inst, "x")
	mustRun(t, inst, "w") // x is now the least recently used
	var once sync.Once
	acquiredHook = func(s *session) {
		if s.id == "x" {
			once.Do(func() { mustRun(t, inst, "y") })
		}
	}
	t.Cleanup(func() { acquiredHook = nil })
	if got := mustRun(t, inst, "x"); got != "args:resume\nq" {
		t.Fatalf("run of x = %q, want a continuation", got)
	}
	if got, want := storedSessions(t, inst), []string{"x", "y"}; !slices.Equal(got, want) {
		t.Fatalf("stored %q, want %q", got, want)
	}
}

// Many new sessions at once at the bound: each run either runs or is
// refused as over capacity, and the bound holds in memory and on disk.
func TestConcurrentNewSessionsAtBound(t *testing.T) {
	r := newRig(t)
	const limit = 4
	inst := r.instance(t, []string{script(t, "cat\n")}, boundSettings(limit))
	var wg sync.WaitGroup
	var mu sync.Mutex
	ran := 0
	for g := range 8 {
		wg.Go(func() {
			for i := range 6 {
				sid := fmt.Sprintf("g%d-%d", g, i)
				res, err := inst.Run(context.Background(), sessionRun(t, sid, "user", "q"), newChanSink())
				switch {
				case err == nil && res != nil:
					mu.Lock()
					ran++
					mu.Unlock()
				case errCode(err) == adapter.CodeCapacityExceeded:
				case errMessage(err) == "cli session was terminated":
					// TerminateSession below got there between its
					// taking the slot and starting the process.
				default:
					t.Errorf("run of %s: %v", sid, err)
				}
				if i%3 == 2 {
					if err := inst.TerminateSession(fmt.Sprintf("g%d-%d", (g+1)%8, i-1)); err != nil {
						t.Errorf("TerminateSession: %v", err)
					}
				}
				inst.mu.Lock()
				live := inst.live
				inst.mu.Unlock()
				if live > limit {
					t.Errorf("%d live sessions, bound %d", live, limit)
				}
			}
		})
	}
	wg.Wait()
	if ran == 0 {
		t.Fatal("no run ran")
	}
	stored := storedSessions(t, inst)
	if len(stored) > limit || !slices.Equal(stored, listedSessions(inst)) {
		t.Fatalf("stored %q, listed %q; want the same, at most %d", stored, listedSessions(inst), limit)
	}
	inst.mu.Lock()
	defer inst.mu.Unlock()
	idle := 0
	for s := inst.idle.next; s != &inst.idle; s = s.next {
		idle++
	}
	if len(inst.sessions) != inst.live || idle != inst.live {
		t.Fatalf("%d sessions in memory, %d live, %d idle; want all equal", len(inst.sessions), inst.live, idle)
	}
}

// A store holding more sessions than the bound (filled under a higher one)
// is trimmed at load, least recently used first, with one log line.
func TestLoadTrimsSessionsOverBound(t *testing.T) {
	r := newRig(t)
	core, logs := observer.New(zap.WarnLevel)
	r.env.Logger = zap.New(core)
	inst := r.instance(t, []string{script(t, argsScript)}, boundSettings(3))
	for _, sid := range []string{"s3", "s1", "s5", "s2", "s4"} {
		st := sessionState{ID: sid, Runs: 1, LastUsedUnix: int64(1000 + 10*int(sid[1]-'0'))}
		if err := writeState(filepath.Join(inst.sessionsDir(), sessionDirName(sid)), &st); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := listedSessions(inst), []string{"s3", "s4", "s5"}; !slices.Equal(got, want) {
		t.Fatalf("listed %q, want %q", got, want)
	}
	if got, want := storedSessions(t, inst), []string{"s3", "s4", "s5"}; !slices.Equal(got, want) {
		t.Fatalf("stored %q, want %q", got, want)
	}
	entries := logs.FilterMessage("cli: removed persisted sessions over max_sessions, least recently used first").All()
	if len(entries) != 1 || entries[0].ContextMap()["count"] != int64(2) {
		t.Fatalf("log entries = %+v, want one with count 2", entries)
	}
	// The loaded sessions keep their order of use: s3 goes first.
	mustRun(t, inst, "s6")
	if got, want := storedSessions(t, inst), []string{"s4", "s5", "s6"}; !slices.Equal(got, want) {
		t.Fatalf("stored %q, want %q", got, want)
	}
}

// A lowered bound applies from the next new session, which evicts down to
// it.
func TestLoweredBoundAppliesAtNextNewSession(t *testing.T) {
	r := newRig(t)
	command := []string{script(t, argsScript)}
	inst := r.instance(t, command, boundSettings(3))
	for _, sid := range []string{"a", "b", "c"} {
		mustRun(t, inst, sid)
	}
	if err := inst.Reconfigure(&iop.AdapterConfig{Name: "agent", Type: Type, Command: command, Settings: boundSettings(1)}); err != nil {
		t.Fatal(err)
	}
	if got := mustRun(t, inst, "c"); got != "args:resume\nq" {
		t.Fatalf("run of c = %q, want a continuation", got)
	}
	mustRun(t, inst, "d")
	if got, want := storedSessions(t, inst), []string{"d"}; !slices.Equal(got, want) {
		t.Fatalf("stored %q, want %q", got, want)
	}
}

// A session whose runs never started the CLI has no state and is not
// kept: fresh ids failing so do not evict sessions worth continuing.
func TestSessionWithoutStateIsNotKept(t *testing.T) {
	r := newRig(t)
	inst := r.instance(t, []string{script(t, argsScript)}, boundSettings(2))
	mustRun(t, inst, "a")
	broken := filepath.Join(t.TempDir(), "broken")
	if err := os.WriteFile(broken, []byte("#!/nonexistent/interpreter\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := inst.Reconfigure(&iop.AdapterConfig{Name: "agent", Type: Type, Command: []string{broken}, Settings: boundSettings(2)}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		_, err := runSync(t, inst, sessionRun(t, fmt.Sprint("new-", i), "user", "q"))
		if errMessage(err) != "cli command could not be started" {
			t.Fatalf("run %d: err = %v, want a start failure", i, err)
		}
	}
	if got := storedSessions(t, inst); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("stored %q, want a alone", got)
	}
	inst.mu.Lock()
	defer inst.mu.Unlock()
	if len(inst.sessions) != 1 || inst.live != 1 {
		t.Fatalf("%d sessions in memory (%d live), want 1", len(inst.sessions), inst.live)
	}
}

func TestMaxSessionsSetting(t *testing.T) {
	cfg := func(v string) *iop.AdapterConfig {
		c := &iop.AdapterConfig{Command: []string{"claude"}}
		if v != "" {
			c.Settings = map[string]string{SettingMaxSessions: v}
		}
		return c
	}
	for v, want := range map[string]int{"": defaultMaxSessions, "1": 1, " 50 ": 50, "100000": maxMaxSessions} {
		c, err := parseConfig(cfg(v))
		if err != nil || c.maxSessions != want {
			t.Errorf("max_sessions %q: %v, %v; want %d", v, c, err, want)
		}
	}
	// 0 is refused rather than read as "unlimited": every count has a bound.
	for _, v := range []string{"0", "-1", "lots", "100001", "1e3"} {
		_, err := parseConfig(cfg(v))
		if got := problemFields(err); !slices.Equal(got, []string{"settings.max_sessions"}) {
			t.Errorf("max_sessions %q: problems %q (%v), want settings.max_sessions", v, got, err)
		}
	}
}
