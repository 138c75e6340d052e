package cli

import (
	"errors"
	"testing"

	"go.uber.org/goleak"

	"github.com/iop-gateway/iop/nodeagent/adapter"
)

// Every run must leave no goroutine behind: readers, waiters and timers all
// end before Run returns.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func errCode(err error) string {
	if ae, ok := errors.AsType[*adapter.Error](err); ok {
		return ae.Code
	}
	return ""
}

func errMessage(err error) string {
	if ae, ok := errors.AsType[*adapter.Error](err); ok {
		return ae.Message
	}
	return ""
}
