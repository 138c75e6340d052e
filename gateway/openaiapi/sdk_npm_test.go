package openaiapi

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// npmOpenAI is the openai npm package version the test decodes with.
const npmOpenAI = "4.104.0"

// npmSDK installs the openai npm package (once per machine, in the user
// cache) and returns the directory holding its node_modules. Without node
// and npm the test is skipped.
func npmSDK(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "iop-test", "npm-openai-"+npmOpenAI)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json")); err == nil {
		return dir
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--silent", "--prefix", dir, "openai@"+npmOpenAI)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install openai@%s: %v\n%s", npmOpenAI, err, out)
	}
	return dir
}

// TestNpmSDKDecodesEveryError: the official openai npm SDK surfaces each
// envelope the edge answers with as an APIError with the edge's status,
// code, type, message, param and Retry-After.
func TestNpmSDKDecodesEveryError(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node")
	}
	dir := npmSDK(t)
	script, err := filepath.Abs("testdata/npm/decode.js")
	if err != nil {
		t.Fatal(err)
	}
	for name, e := range typedEdgeErrors(t) {
		t.Run(name, func(t *testing.T) {
			base := typedErrorServer(t, e)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "node", script, base)
			cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("node: %v\n%s", err, out)
			}
			var got struct {
				APIError   bool    `json:"apiError"`
				Status     int     `json:"status"`
				Code       string  `json:"code"`
				Type       string  `json:"type"`
				Message    string  `json:"message"`
				Param      *string `json:"param"`
				RetryAfter string  `json:"retryAfter"`
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("decode %q: %v", out, err)
			}
			wantRetry := ""
			if e.RetryAfter > 0 {
				wantRetry = strconv.Itoa(e.RetryAfter)
			}
			if !got.APIError || got.Status != e.Status || got.Code != e.Code || got.Type != e.Type || got.Message != e.Message ||
				(e.Param == nil) != (got.Param == nil) || (e.Param != nil && *got.Param != *e.Param) || got.RetryAfter != wantRetry {
				t.Fatalf("npm SDK decoded %+v, want %+v", got, e)
			}
		})
	}
}
