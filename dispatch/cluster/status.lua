-- The cluster's occupancy, read at one instant. KEYS: the lease keys to
-- count, then (last) the set of edges that publish pending figures.
-- ARGV: the prefix of an edge's pending hash (<prefix>:pending:), the
-- most edges read (0: no pending figures), the most models read of one
-- edge, the largest figure counted.
-- Returns {counts, pending}: counts the live leases of each key (expiry
-- past Redis's now), in KEYS's order; pending pairs of a model and its
-- waiting requests summed over the edges read. An edge whose hash is gone
-- (expired, or emptied) leaves the set; a hash of more models than the
-- bound, or a figure that is not a whole number from 1 to the largest,
-- is not counted (another program's value: an edge publishes its own
-- models' figures only).
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
  local gone = {}
  for _, e in ipairs(redis.call('SRANDMEMBER', set, maxEdges)) do
    local h = ARGV[1] .. e
    local n = redis.call('HLEN', h)
    if n == 0 then
      gone[#gone + 1] = e
    elseif n <= maxModels then
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
