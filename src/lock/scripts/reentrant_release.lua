-- Count one hold down; the last one deletes the lock and wakes the waiters.
-- KEYS: lock   ARGV: owner, lease ms, release channel
-- Returns -1 when we do not hold it, else the holds left (0 = released).
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' or redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return -1
end
local holds = redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
if holds > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return holds
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[3], KEYS[1])
return 0
