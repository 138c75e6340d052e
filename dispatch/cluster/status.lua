-- The cluster's occupancy, read at one instant. KEYS: the lease keys to
-- count, then (last) the set of edges that publish pending figures.
-- ARGV: the prefix of an edge's pending hash (<prefix>:pending:), the
-- most edges read (0: no pending figures), the most models read of one
-- edge, the largest figure counted.
-- Returns {counts, pending}: counts the live leases of each key (expiry
-- past Redis's now), in KEYS's order; pending pairs of a model and its
-- waiting requests summed over the edges read. An edge whose hash is gone
-- (expired, or emptied) leaves the set; a hash of more models than the
-- bound, a figure that is not a whole number from 1 to the largest, or
-- a set or an edge's key of another type, is not counted (another
-- program's value: an edge publishes its own models' figures only). A
-- lease key of another type is an error reply.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local counts = {}
for i = 1, #KEYS - 1 do
  counts[i] = redis.call('ZCOUNT', KEYS[i], '(' .. now, '+inf')
end
local sums, pending = {}, {}
local maxEdges = tonumber(ARGV[2])
if maxEdges > 0 then
  local set = KEYS[#KEYS]
  local maxModels, maxFigure = tonumber(ARGV[3]), tonumber(ARGV[4])
  local gone, edges = {}, {}
  -- Keys of another type (another program's values) are not read: a
  -- refusal would cost the lease counts too.
  if redis.call('TYPE', set)['ok'] == 'set' then
    edges = redis.call('SRANDMEMBER', set, maxEdges)
  end
  for _, e in ipairs(edges) do
    local h = ARGV[1] .. e
    local kind = redis.call('TYPE', h)['ok']
    if kind == 'none' then
      gone[#gone + 1] = e
    elseif kind == 'hash' and redis.call('HLEN', h) <= maxModels then
      local kv = redis.call('HGETALL', h)
      for i = 1, #kv, 2 do
        local k = tonumber(kv[i + 1])
        if k and k >= 1 and k <= maxFigure and k == math.floor(k) then
          sums[kv[i]] = (sums[kv[i]] or 0) + k
        end
      end
    end
  end
  if #gone > 0 then
    -- A refusal (out of memory, a read-only replica) leaves them for the
    -- next status: the figures are still read.
    redis.pcall('SREM', set, unpack(gone))
  end
  for m, k in pairs(sums) do
    pending[#pending + 1] = m
    pending[#pending + 1] = k
  end
end
return {counts, pending}
