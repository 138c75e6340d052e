// Package route chooses which of a model's candidates serves a request and
// keeps the approximate prompt-prefix index that the prefix_affinity
// strategy consults. It is pure: no goroutines, no clocks, no I/O. The
// dispatcher calls it under its own mutex, so nothing here locks and
// nothing here is safe for concurrent use on its own.
//
// # Strategies
//
// models[].routing selects one (ParseStrategy):
//
//   - ordered: the first fitting candidate in configured order, so a model
//     fills its first provider before spilling over.
//   - least_load (the edge config's default): the fitting candidate with
//     the lowest Score, ties by configured order; without load reports this
//     is the lease occupancy the dispatcher always spread by.
//   - prefix_affinity: the fitting candidate that most recently served the
//     longest prefix of this prompt (see Prefixes), so the backend's prefix
//     cache (vLLM automatic prefix caching, SGLang's radix cache) skips
//     the prefill of what it already holds; unless that candidate is
//     overloaded relative to the least loaded one (Options), or no
//     candidate matches at all, when it falls back to least_load. This is
//     the cache-aware policy of SGLang's router (approximate radix tree per
//     worker, longest match unless load is unbalanced, then shortest
//     queue) with the Gateway API Inference Extension's load signals
//     (queue depth and KV-cache utilisation) in the load figure.
//
// The caller passes only candidates that fit (live, a free lease slot, able
// to serve the request), in configured order, and Pick returns an index
// into that slice: whatever the strategy and however wrong the load
// reports, a request only ever goes to a candidate with a free slot.
//
// # Load score
//
// Score(c) is dimensionless, lower is better, 1.0 being about one fully
// occupied candidate:
//
//	occ   = max(InFlight, Running) / Capacity
//	queue = 2 * Waiting / Capacity
//	kv    = 0.25*KVUsage + 4*max(0, KVUsage-0.8)
//	Score = occ + queue + kv                (Load.Known)
//	Score = InFlight / Capacity             (no report, or a stale one)
//
// Why these terms:
//
//   - occ: the edge's own lease count is exact and current but blind to
//     traffic that reaches the backend some other way (another edge in a
//     cluster, direct clients); the backend's running count sees all of it
//     but lags by a report interval. The larger of the two is the better
//     guess of how busy the backend is right now. Normalising by the lease
//     capacity makes providers of different sizes comparable, as the
//     dispatcher always has.
//   - queue: requests waiting inside the backend mean it is already
//     saturated (max_num_seqs or KV cache exhausted): a new request queues
//     behind every one of them, whereas a running request merely shares the
//     batch. So a waiting request counts twice a running one.
//   - kv: below ~80% KV-cache usage mostly reflects cached prefixes and
//     long contexts in flight, a mild signal (at most 0.2). Above it vLLM
//     runs out of free blocks and starts preempting (recomputing) running
//     sequences, so latency climbs steeply: the term rises to 1.05 at a full
//     cache, as much as a candidate with every lease taken.
//
// A report of an idle backend (all zeros) scores exactly as no report, so
// a candidate is not preferred or avoided merely for reporting. Inputs are
// sanitised (NaN and negatives are 0, KV usage is clamped to [0, 1], the
// capacity is at least 1), so Score is always finite and comparisons are
// total.
//
// # Balance thresholds
//
// prefix_affinity keeps the best-matching candidate a unless
//
//	Score(a) - Score(m) > BalanceAbs  &&  Score(a) > Score(m) * BalanceRel
//
// where m is the least loaded candidate; then it takes m. SGLang applies
// its thresholds (32 requests absolute, 1.0001 relative) to the spread of
// running-request counts across all workers; here loads are fractions of
// capacity, and the comparison is between the candidate affinity would
// choose and the one least_load would, since an unrelated imbalance
// elsewhere says nothing about whether this request should give up its
// cache hit. The defaults (0.5 and 1.5) keep affinity until the cached
// candidate is loaded by at least half its capacity more than the idlest
// one and 1.5 times as much: a cache hit saves the whole prefill of a long
// prompt, worth a fair amount of batch sharing.
//
// # Prefix index
//
// Hash cuts the canonical prompt text into BlockSize-byte blocks (at most
// MaxBlocks; a trailing partial block is ignored) and hashes them as a
// chain, like vLLM's block hashes: block i's hash covers blocks 0..i, so
// one hash names a whole prefix. Prefixes maps such hashes to the few
// candidate ids that served them most recently, bounded by a number of
// entries with least-recently-used eviction. It is approximate, like
// SGLang's tree: it records what the edge sent, not what the backend still
// caches, and a hash collision (keyed by a per-process random seed, so not
// craftable) merely biases one routing choice.
package route
