package config

import (
	"fmt"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Build returns the logger this section describes: JSON for production,
// console (human-readable) for `make run`. Its first lines warn of each
// IOP_* variable that overrode no key at load (a typo leaves the key as it
// was): the config is loaded before any logger exists.
func (l Log) Build() (*zap.Logger, error) {
	zc, err := l.zapConfig()
	if err != nil {
		return nil, err
	}
	log, err := zc.Build()
	if err != nil {
		return nil, fmt.Errorf("config: log: %w", err)
	}
	warnUnmatchedEnv(log, l.unmatchedEnv)
	return log, nil
}

// warnUnmatchedEnv logs one warning per name; never the value.
func warnUnmatchedEnv(log *zap.Logger, names []string) {
	for _, name := range names {
		log.Warn("environment variable overrides no config key; misspelt?", zap.String("variable", name))
	}
}

func (l Log) zapConfig() (zap.Config, error) {
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
		return zc, fmt.Errorf("config: log level: %w", err)
	}
	zc.Level = zap.NewAtomicLevelAt(lvl)
	zc.DisableStacktrace = true
	// No sampling: zap's production preset drops repeats of a message
	// beyond 100 a second without saying so, and an access log that
	// silently loses most of a burst of 401s hides exactly what an
	// operator looks for. Volume is controlled with the level instead.
	zc.Sampling = nil
	return zc, nil
}
