-- A reentrant lock is a hash: owner -> hold count, with a lease on the key.
-- Take it when free, or count up when we already hold it; otherwise say how
-- long the current holder's lease still runs. A fenced lock also takes its
-- fencing token here, in the same atomic step as the grant: no holder can
-- stall between the two and come back with a token newer than the
-- rightful holder's.
-- KEYS: lock, fence counter (read only when fenced)
-- ARGV: owner, lease ms, fenced ('1' | '0')
-- Returns {1, holds, token (0 unfenced)} when held by us now,
-- {0, pttl of the holder, 0} otherwise. A lock key of another shape (a
-- SETNX or token lock on the same SKU) is someone else's lock.
-- What can fail comes before the first write (Redis keeps the writes a
-- script made before an error): the lease is checked, and the token's
-- INCR, which fails alone on a counter that is no integer, goes first.
if not tonumber(ARGV[2]) then error('the lease is not a number: nothing written') end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' or (kind == 'hash' and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1) then
  local token = 0
  if ARGV[3] == '1' then token = redis.call('INCR', KEYS[2]) end
  local holds = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, holds, token}
end
return {0, redis.call('PTTL', KEYS[1]), 0}
