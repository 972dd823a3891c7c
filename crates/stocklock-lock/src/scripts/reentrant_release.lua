-- Count one hold down (or, with ARGV[4] = '1', all of them: an owner that
-- is done, releasing for good, which is safe to repeat); the last one
-- deletes the lock and wakes the waiters.
-- KEYS: lock   ARGV: owner, lease ms, release channel, all ('1' | '0'),
--               the message to publish (the releasing process)
-- Returns -1 when we do not hold it, else the holds left (0 = released).
-- The lease is checked before the first write (Redis keeps the writes a
-- script made before an error).
if not tonumber(ARGV[2]) then error('the lease is not a number: nothing written') end
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' or redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return -1
end
local holds = 0
if ARGV[4] ~= '1' then
  holds = redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
end
if holds > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return holds
end
redis.call('HDEL', KEYS[1], ARGV[1])
if redis.call('HLEN', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[3], ARGV[5])
end
return 0
