-- Extend a lease lock only if we still own it.
-- KEYS: lock   ARGV: owner token, lease ms
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
