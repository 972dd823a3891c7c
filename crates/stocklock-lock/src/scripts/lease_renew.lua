-- Extend a lease lock only if we still own it.
-- KEYS: lock   ARGV: owner token, lease ms
-- (a reentrant lock on the same key is a hash: not ours either)
if redis.call('TYPE', KEYS[1])['ok'] == 'string' and redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
