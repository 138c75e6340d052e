package config

import (
	"errors"
	"flag"
	"fmt"
	"os"
)

// FromFlags implements the flags both commands share: --config FILE (load
// it) and --check-config FILE (validate it, print the verdict and exit 0,
// or every problem and exit 2). It returns the loaded config, or, when the
// process should exit now, a nil config and the exit code (1 for a config
// that cannot be loaded; 2 for bad flags, as the flag package exits for
// an unknown one). file is the --config path, for reloads.
func FromFlags[T any](defaultFile string, load func(string) (*T, error)) (cfg *T, file string, code int) {
	configFile := flag.String("config", defaultFile, "config file")
	checkFile := flag.String("check-config", "", "validate this config file and exit (0 ok, 2 problems)")
	flag.Parse()
	if flag.NArg() > 0 {
		// "iop-node node.yaml" (no --config) must not run the default
		// file instead of the one named.
		fmt.Fprintf(os.Stderr, "unexpected argument %q: the config file is given with --config FILE\n", flag.Arg(0))
		flag.Usage()
		return nil, "", 2
	}
	if *checkFile != "" {
		cfg, err := load(*checkFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			if pe := (*ProblemsError)(nil); errors.As(err, &pe) {
				printUnmatchedEnv(*checkFile, pe.UnmatchedEnv)
			}
			return nil, "", 2
		}
		if u, ok := any(cfg).(interface{ UnmatchedEnv() []string }); ok {
			printUnmatchedEnv(*checkFile, u.UnmatchedEnv())
		}
		// The files the config names, loaded as the start will load them:
		// "ok" for a key pair that cannot load was a start that fails.
		if f, ok := any(cfg).(interface{ CheckFiles(string) error }); ok {
			if err := f.CheckFiles(*checkFile); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return nil, "", 2
			}
		}
		fmt.Printf("config %s: ok\n", *checkFile)
		return nil, "", 0
	}
	cfg, err := load(*configFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return nil, "", 1
	}
	return cfg, *configFile, 0
}

// printUnmatchedEnv warns of IOP_* variables that override no key: a
// warning, not a problem (the verdict and exit code stand), as a variable
// of another tool may share the prefix.
func printUnmatchedEnv(file string, names []string) {
	for _, name := range names {
		fmt.Fprintf(os.Stderr, "config %s: warning: environment variable %s overrides no config key; misspelt?\n", file, name)
	}
}
