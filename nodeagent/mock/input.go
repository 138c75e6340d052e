package mock

import (
	"errors"
	"strings"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// errBadInput marks a run input the mock cannot answer; Run turns it into
// an invalid_request adapter.Error.
var errBadInput = errors.New("bad input")

// chatText returns the last user message's text and the word count across
// all messages (every role), which stands in for prompt tokens.
func chatText(input *iop.RunInput) (lastUser string, promptWords int) {
	for _, m := range input.GetMessages() {
		text := adapter.MessageText(m)
		promptWords += len(strings.Fields(text))
		if m.GetRole() == iop.ChatRole_CHAT_ROLE_USER {
			lastUser = text
		}
	}
	return lastUser, promptWords
}

func countWords(texts []string) int {
	n := 0
	for _, t := range texts {
		n += len(strings.Fields(t))
	}
	return n
}
