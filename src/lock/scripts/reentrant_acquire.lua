-- A reentrant lock is a hash: owner -> hold count, with a lease on the key.
-- Take it when free, or count up when we already hold it; otherwise say how
-- long the current holder's lease still runs.
-- KEYS: lock   ARGV: owner, lease ms
-- Returns {1, holds} when held by us now, {0, pttl of the holder} otherwise.
-- A lock key of another shape (a SETNX or token lock on the same SKU) is
-- someone else's lock.
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' or (kind == 'hash' and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1) then
  local holds = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, holds}
end
return {0, redis.call('PTTL', KEYS[1])}
