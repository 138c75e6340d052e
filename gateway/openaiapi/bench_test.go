package openaiapi

import (
	"strings"
	"testing"
)

// bigChat is a ~4 MiB chat body, the size class the edge accepts.
func bigChat() []byte {
	msg := `{"role":"user","content":"` + strings.Repeat(`lorem ipsum \"model\" é `, 200) + `"},`
	var b strings.Builder
	b.WriteString(`{"messages":[`)
	for b.Len() < 4<<20 {
		b.WriteString(msg)
	}
	b.WriteString(`{"role":"user","content":"end"}],"model":"qwen-7b","stream":true}`)
	return []byte(b.String())
}

func BenchmarkParseChat4MiB(b *testing.B) {
	body := bigChat()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := ParseChat(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRewriteModel4MiB(b *testing.B) {
	body := bigChat()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := RewriteModel(body, "Qwen/Qwen2.5-7B-Instruct"); err != nil {
			b.Fatal(err)
		}
	}
}
