-- Release a lease lock only if we still own it: compare and delete in one
-- step. A GET followed by a DEL from the client could delete a lock that
-- expired in between and now belongs to someone else.
-- KEYS: lock   ARGV: owner token, release channel
-- (a reentrant lock on the same key is a hash: not ours either)
if redis.call('TYPE', KEYS[1])['ok'] == 'string' and redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], KEYS[1])
  return 1
end
return 0
