package config

import (
	"fmt"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Build returns the logger this section describes: JSON for production,
// console (human-readable) for `make run`.
func (l Log) Build() (*zap.Logger, error) {
	var zc zap.Config
	if l.Format == "console" {
		zc = zap.NewDevelopmentConfig()
		zc.EncoderConfig.EncodeLevel = zapcore.CapitalColorLevelEncoder
	} else {
		zc = zap.NewProductionConfig()
		zc.EncoderConfig.TimeKey = "ts"
		zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	}
	lvl, err := zapcore.ParseLevel(l.Level)
	if err != nil {
		return nil, fmt.Errorf("config: log level: %w", err)
	}
	zc.Level = zap.NewAtomicLevelAt(lvl)
	zc.DisableStacktrace = true
	return zc.Build()
}
