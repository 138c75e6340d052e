package ollama

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// MaxLineBytes bounds one NDJSON line of an Ollama stream. Real lines are a
// few hundred bytes; the bound only stops a broken or hostile upstream from
// growing the buffer without limit.
const MaxLineBytes = 8 << 20

var (
	// ErrLineTooLong is wrapped when a stream line exceeds MaxLineBytes.
	ErrLineTooLong = errors.New("ollama: stream line exceeds 8 MiB")
	// ErrMalformedLine is wrapped when a stream line is not a JSON object of
	// the expected shape.
	ErrMalformedLine = errors.New("ollama: malformed stream line")
	// ErrStreamTruncated is wrapped when the stream ends before an object
	// with "done": true.
	ErrStreamTruncated = errors.New("ollama: stream ended before done")
	// ErrNoAnswer is wrapped when a stream finished without any line
	// carrying the endpoint's answer (message for chat, response for
	// generate).
	ErrNoAnswer = errors.New("ollama: stream finished without an answer")
)

// chunk is one line of /api/chat or /api/generate output. Chat carries text
// in message.content, generate in response, and a thinking model's
// reasoning beside it (message.thinking, thinking); the final line has
// done=true plus the statistics; a failure mid-stream is a line {"error": "..."}.
type chunk struct {
	Message    *chunkMessage `json:"message"`
	Response   *string       `json:"response"`
	Thinking   string        `json:"thinking"` // generate's reasoning text
	Done       bool          `json:"done"`
	DoneReason string        `json:"done_reason"`
	// Pointers: Ollama omits zero counts, and absent on every line means
	// "usage unknown" rather than zero.
	PromptEvalCount *int64 `json:"prompt_eval_count"`
	EvalCount       *int64 `json:"eval_count"`
	// Error is a pointer, as the counts are: few lines carry one, and the
	// 16 bytes it saves on every line keep each line's allocation in the
	// size class it had before Thinking was read.
	Error *json.RawMessage `json:"error"`
}

type chunkMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// Thinking is reasoning text from thinking models, relayed apart from
	// the answer (adapter.Reasoning).
	Thinking  string          `json:"thinking"`
	ToolCalls []chunkToolCall `json:"tool_calls"`
}

type chunkToolCall struct {
	ID       string `json:"id"`
	Function struct {
		Index     *int            `json:"index"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// decodeChunk parses one non-blank NDJSON line.
func decodeChunk(line []byte) (*chunk, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return nil, fmt.Errorf("%w: not a JSON object", ErrMalformedLine)
	}
	var c chunk
	if err := json.Unmarshal(line, &c); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedLine, err)
	}
	return &c, nil
}

// errorText returns the upstream failure a line reports, or "" when the
// line is not an error line. Ollama sends a string; an OpenAI-style object
// ({"message": ...}) from a proxy in front of it is tolerated too.
func (c *chunk) errorText() string {
	if c.Error == nil {
		return ""
	}
	raw := bytes.TrimSpace(*c.Error)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return boundText(s, "unknown upstream error")
	}
	var obj struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Message != "" {
		return boundText(obj.Message, "unknown upstream error")
	}
	return "unknown upstream error"
}

// lineReader yields the non-blank lines of an NDJSON body.
type lineReader struct {
	sc *bufio.Scanner
}

// newLineReader reads lines of up to maxLine bytes. Its buffer starts at
// 4 KiB and grows only for a longer line: it is held for the stream's whole
// life, and Ollama's lines are a few hundred bytes.
func newLineReader(r io.Reader, maxLine int) *lineReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, min(4<<10, maxLine)), maxLine)
	return &lineReader{sc: sc}
}

// next returns the next non-blank line (valid until the following call),
// io.EOF at the end of the body, ErrLineTooLong for an oversized line, or
// the read error (e.g. the request's context was cancelled).
func (l *lineReader) next() ([]byte, error) {
	for l.sc.Scan() {
		if line := bytes.TrimSpace(l.sc.Bytes()); len(line) > 0 {
			return line, nil
		}
	}
	err := l.sc.Err()
	switch {
	case err == nil:
		return nil, io.EOF
	case errors.Is(err, bufio.ErrTooLong):
		return nil, ErrLineTooLong
	default:
		return nil, err
	}
}

// maxMessageLen bounds upstream text copied into an error message.
const maxMessageLen = 1024

// boundText trims s for use as a caller-visible message, falling back to
// def when nothing is left.
func boundText(s, def string) string {
	s = strings.TrimSpace(s)
	if len(s) > maxMessageLen {
		s = strings.ToValidUTF8(s[:maxMessageLen], "") + "…"
	}
	if s == "" {
		return def
	}
	return s
}
