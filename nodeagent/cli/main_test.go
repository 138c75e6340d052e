package cli

import (
	"errors"
	"testing"

	"go.uber.org/goleak"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Every run must leave no goroutine behind: readers, waiters and timers all
// end before Run returns.
func TestMain(m *testing.M) {
	// The test binary is the guard of the CLIs its tests start.
	RunGuardIfAsked()
	goleak.VerifyTestMain(m)
}

func errCode(err error) iop.ErrorCode {
	if ae, ok := errors.AsType[*adapter.Error](err); ok {
		return ae.Code
	}
	return iop.ErrorCode_ERROR_CODE_UNSPECIFIED
}

func errMessage(err error) string {
	if ae, ok := errors.AsType[*adapter.Error](err); ok {
		return ae.Message
	}
	return ""
}
