-- Extend the lease while we still hold the lock (the watchdog's heartbeat).
-- KEYS: lock   ARGV: owner, lease ms
if redis.call('TYPE', KEYS[1])['ok'] == 'hash' and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
