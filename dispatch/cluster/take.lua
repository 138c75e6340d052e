-- KEYS[1] the resource's leases, KEYS[2] its long leases (sorted sets,
-- score = expiry in Redis milliseconds); KEYS[3] the waiters of the
-- request's model and kind on every edge (score = arrival; a member
-- <edge>/w<n>:<shift ms> carries its priority shift), or "" for none;
-- KEYS[4] the lease id's returned mark (see return.lua); KEYS[5] the
-- waiters of this resource and kind alone (pinned: see PinWaitKey), or ""
-- for none (an edge that sends only four keys: KEYS[5] is nil).
-- ARGV: ttl_ms, capacity, long_capacity, is_long ("1"/"0"), lease id,
-- waiter member of this request, in KEYS[3] or KEYS[5] ("" for one not
-- queued), slack_ms,
-- max_yield_ms, shift_ms (a request not queued counts as arriving this
-- much earlier: its priority), max_shift_ms (the largest shift of any
-- waiter), waited_ms (how long the request has waited on its edge: its
-- arrival when its member is not in the set, which keeps members for
-- 10 × max_yield_ms only and may have missed a registration),
-- edge_prefix (<prefix>:edge:, before an edge id its liveness key).
-- Returns 1 taken, 0 the cluster has no free slot, 2 yield: a waiter of
-- another live edge (an id's edge is its part before the last /) that is
-- ahead of this request by more than slack_ms (arrival less shift) and
-- arrived less than max_yield_ms ago is owed the slot first; 3 a key holds
-- something else than a sorted set (written by another program), and the
-- ledger cannot count the resource's leases.
-- A take whose id is marked returned came late: it got no answer, and
-- its edge sent that id's fenced return, which Redis ran first (the
-- take's bytes held up on another connection). Taken now, the lease
-- would be held by no edge, never renewed nor returned, its slot taken
-- in every edge's count for the TTL. It writes nothing and answers 0
-- (no edge reads the answer: its caller's take already failed).
if redis.call('EXISTS', KEYS[4]) == 1 then
  return 0
end
local pinKey = KEYS[5] or ''
for _, key in ipairs({KEYS[1], KEYS[2], KEYS[3], pinKey}) do
  if key ~= '' then
    local kind = redis.call('TYPE', key)['ok']
    if kind ~= 'zset' and kind ~= 'none' then
      return 3
    end
  end
end
-- The first write: one Redis refuses out of memory (a ZADD; XX with no
-- such member, it changes nothing). Redis refuses a script's writes for
-- memory only until it has written, and the removals below never are:
-- without it a take went through out of memory while every renewal (its
-- first write a ZADD) was refused, and a TTL later the other edges
-- stopped counting the leases taken so.
redis.call('ZADD', KEYS[1], 'XX', 0, '')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
if KEYS[3] ~= '' or pinKey ~= '' then
  -- A waiter's place in the order is its arrival less its shift.
  local function shiftOf(m)
    return tonumber(string.match(m, ':(%-?%d+)$')) or 0
  end
  local mine = now - tonumber(ARGV[11]) - tonumber(ARGV[9])
  if ARGV[6] ~= '' then
    local s = KEYS[3] ~= '' and redis.call('ZSCORE', KEYS[3], ARGV[6]) or nil
    if not s and pinKey ~= '' then s = redis.call('ZSCORE', pinKey, ARGV[6]) end
    if s then mine = tonumber(s) - shiftOf(ARGV[6]) end
  end
  local maxYield = tonumber(ARGV[8])
  local before = mine - tonumber(ARGV[7])
  -- Lease ids and waiter members are <edge id>/<n>. The edge's own
  -- waiters are not yielded to: its queue serves them oldest first, and
  -- one being handed a slot on this edge would otherwise make a younger
  -- waiter's take yield, leaving a free slot idle until the next wake.
  local self = string.match(ARGV[5], '^(.*)/[^/]*$')
  -- In each wait set (the model's, then the resource's pinned one): the
  -- waiters that arrived less than max_yield_ms ago and may be ahead (a
  -- shift moves one ahead by at most max_shift_ms), oldest first.
  for _, set in ipairs({KEYS[3], pinKey}) do
    if set ~= '' then
      redis.call('ZREMRANGEBYSCORE', set, '-inf', now - 10 * maxYield)
      local older = redis.call('ZRANGEBYSCORE', set, now - maxYield, before + tonumber(ARGV[10]), 'WITHSCORES', 'LIMIT', 0, 64)
      for i = 1, #older, 2 do
        local m = older[i]
        local edge = string.match(m, '^(.*)/[^/]*$')
        if m ~= ARGV[6] and edge ~= self and tonumber(older[i + 1]) - shiftOf(m) <= before then
          if edge and redis.call('EXISTS', ARGV[12] .. edge) == 1 then
            return 2
          end
          redis.call('ZREM', set, m) -- a waiter of an edge that is gone
        end
      end
    end
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
if ARGV[4] == '1' and redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) then
  return 0
end
-- A key's expiry is only ever raised: an edge with a shorter TTL (edges'
-- lease_ttl_sec may differ) must not have Redis delete, with the key, a
-- longer lease of another edge.
local function outlive(key, ms)
  if redis.call('PTTL', key) < ms then
    redis.call('PEXPIRE', key, ms)
  end
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[5])
outlive(KEYS[1], 2 * ttl)
if ARGV[4] == '1' then
  redis.call('ZADD', KEYS[2], now + ttl, ARGV[5])
  outlive(KEYS[2], 2 * ttl)
end
return 1
