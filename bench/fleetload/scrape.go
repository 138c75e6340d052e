package fleetload

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Prefix cache counters, in tokens, as vLLM V1 (and vllmsim) export them.
const (
	MetricPrefixQueries = "vllm:prefix_cache_queries_total"
	MetricPrefixHits    = "vllm:prefix_cache_hits_total"
)

// maxMetricsBody bounds one /metrics answer.
const maxMetricsBody = 4 << 20

// ScrapeHitRate sums the prefix cache counters over the backends' /metrics
// (every label set). They are cumulative: scrape before and after a run
// and subtract; hits/queries is the token hit rate. A nil client takes
// http.DefaultClient.
func ScrapeHitRate(ctx context.Context, client *http.Client, backends []string) (queries, hits float64, err error) {
	if client == nil {
		client = http.DefaultClient
	}
	for _, b := range backends {
		q, h, err := scrapeOne(ctx, client, strings.TrimRight(b, "/")+"/metrics")
		if err != nil {
			return 0, 0, err
		}
		queries += q
		hits += h
	}
	return queries, hits, nil
}

func scrapeOne(ctx context.Context, client *http.Client, url string) (queries, hits float64, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("fleetload: scrape: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("fleetload: scrape: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("%w: %d from %s", ErrStatus, resp.StatusCode, url)
	}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, maxMetricsBody))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		name, v, ok := parseSample(sc.Text())
		switch {
		case !ok:
		case name == MetricPrefixQueries:
			queries += v
		case name == MetricPrefixHits:
			hits += v
		}
	}
	if err := sc.Err(); err != nil {
		return 0, 0, fmt.Errorf("fleetload: scrape %s: %w", url, err)
	}
	return queries, hits, nil
}

// parseSample splits a text-format sample `name{labels} value [ts]`.
func parseSample(line string) (string, float64, bool) {
	line = strings.TrimSpace(line)
	if line == "" || line[0] == '#' {
		return "", 0, false
	}
	end := strings.IndexAny(line, "{ \t")
	if end <= 0 {
		return "", 0, false
	}
	name, rest := line[:end], line[end:]
	if rest[0] == '{' {
		// Label values may hold '}' inside quotes.
		inQuote, esc, closed := false, false, -1
		for i := 1; i < len(rest) && closed < 0; i++ {
			switch c := rest[i]; {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inQuote = !inQuote
			case c == '}' && !inQuote:
				closed = i
			}
		}
		if closed < 0 {
			return "", 0, false
		}
		rest = rest[closed+1:]
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return "", 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return "", 0, false
	}
	return name, v, true
}
