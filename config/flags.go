package config

import (
	"flag"
	"fmt"
	"os"
)

// FromFlags implements the flags both commands share: --config FILE (load
// it) and --check-config FILE (validate it, print the verdict and exit 0,
// or every problem and exit 2). It returns the loaded config, or, when the
// process should exit now, a nil config and the exit code (1 for a config
// that cannot be loaded). file is the --config path, for reloads.
func FromFlags[T any](defaultFile string, load func(string) (*T, error)) (cfg *T, file string, code int) {
	configFile := flag.String("config", defaultFile, "config file")
	checkFile := flag.String("check-config", "", "validate this config file and exit (0 ok, 2 problems)")
	flag.Parse()
	if *checkFile != "" {
		if _, err := load(*checkFile); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return nil, "", 2
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
