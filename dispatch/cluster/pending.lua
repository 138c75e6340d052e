-- KEYS[1] this edge's pending hash, KEYS[2] the set of edges that
-- publish pending figures. ARGV: ttl_ms (the hash's expiry), the set's
-- expiry in ms, this edge's id, then pairs of a model and its waiting
-- requests. Replaces the edge's figures at once (a status never reads
-- the hash emptied between its removal and its new fields, which would
-- drop the edge from the set): the edge joins the set while it has
-- figures and leaves it when it has none.
if #ARGV > 3 then
  -- The first write: one Redis refuses out of memory (SADD). Redis
  -- refuses a script's writes for memory only until it has written, and
  -- a DEL first would let the figures grow memory a full Redis refuses.
  redis.call('SADD', KEYS[2], ARGV[3])
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  redis.call('DEL', KEYS[1])
  for i = 4, #ARGV - 1, 2 do
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
else
  redis.call('DEL', KEYS[1])
  redis.call('SREM', KEYS[2], ARGV[3])
end
return 1
