package config

import (
	"strconv"
	"strings"
	"testing"
)

// Origins are kept as a browser sends them: lower case, without the
// scheme's default port; "*" alone allows any.
func TestCORSOriginsNormalized(t *testing.T) {
	for in, want := range map[string]string{
		"https://chat.example.com":         "https://chat.example.com",
		" https://Chat.Example.COM:443 ":   "https://chat.example.com",
		"HTTP://localhost:80":              "http://localhost",
		"http://localhost:5173":            "http://localhost:5173",
		"https://[::1]:8443":               "https://[::1]:8443",
		"chrome-extension://abcdefghijklm": "chrome-extension://abcdefghijklm",
		"*":                                "*",
	} {
		c := minimalEdge()
		c.CORS.AllowedOrigins = []string{in}
		if err := c.Normalize(); err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if got := c.CORS.AllowedOrigins[0]; got != want {
			t.Errorf("%q became %q, want %q", in, got, want)
		}
	}
	c := minimalEdge()
	if err := c.Normalize(); err != nil || c.CORS.Enabled() {
		t.Fatalf("default: %v, enabled %v", err, c.CORS.Enabled())
	}
}

// What is not an origin is refused by index, every problem at once,
// without showing a value that may hold credentials.
func TestCORSOriginsRefused(t *testing.T) {
	bad := []string{
		"https://chat.example.com/", "https://chat.example.com/app", "chat.example.com", "https://*.example.com",
		"null", "https://user:pw@chat.example.com", "https://chat.example.com?x=1", "https://chat.example.com#f",
		"https://chat.example.com:0", "https://chat.example.com:99999", "https://chat.example.com:", "",
	}
	c := minimalEdge()
	c.CORS.AllowedOrigins = bad
	err := c.Normalize()
	if err == nil {
		t.Fatal("accepted")
	}
	for i := range bad {
		if want := "cors.allowed_origins[" + itoa(i) + "]"; !strings.Contains(err.Error(), want) {
			t.Errorf("%q not refused (%s missing) in %v", bad[i], want, err)
		}
	}
	if strings.Contains(err.Error(), "pw") {
		t.Errorf("credentials shown: %v", err)
	}

	c = minimalEdge()
	c.CORS.AllowedOrigins = []string{"https://a.example", "*"}
	if err := c.Normalize(); err == nil || !strings.Contains(err.Error(), `cors.allowed_origins[1] is "*", which must be the only entry`) {
		t.Errorf("* beside an origin: %v", err)
	}
	c = minimalEdge()
	c.CORS.AllowedOrigins = []string{"https://a.example", "https://A.example:443"}
	if err := c.Normalize(); err == nil || !strings.Contains(err.Error(), "cors.allowed_origins[1] repeats cors.allowed_origins[0]") {
		t.Errorf("repeat: %v", err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// IOP_CORS_ALLOWED_ORIGINS sets the list, comma separated, as every list
// key is set.
func TestCORSOriginsFromEnv(t *testing.T) {
	f := writeFile(t, "edge.yaml", decodeBase)
	t.Setenv("IOP_CORS_ALLOWED_ORIGINS", "https://a.example, http://localhost:5173")
	c, err := LoadEdge(f)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.CORS.AllowedOrigins, "|"); got != "https://a.example|http://localhost:5173" {
		t.Fatalf("allowed_origins %q", got)
	}
}
