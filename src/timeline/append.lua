-- Appends one instance's batch of critical sections to a SKU's timeline,
-- then drops the oldest batches while the rest still hold `keep` sections.
-- One list element per batch (not per section): a flush costs Redis one
-- element however many sections it carries.
-- KEYS: sections (list of "COUNT|JSON" batches), ledger (its
-- 'timeline_sections' field counts what the list holds; a reset clears it
-- with the list)
-- ARGV: the batch ("COUNT|JSON"), its count, keep
-- The numbers are checked before the first write (Redis keeps the writes
-- a script made before an error).
local keep = tonumber(ARGV[3])
if not (keep and tonumber(ARGV[2])) then error('bad count or keep: nothing written') end
redis.call('RPUSH', KEYS[1], ARGV[1])
local total = redis.call('HINCRBY', KEYS[2], 'timeline_sections', ARGV[2])
while total > keep do
  local first = redis.call('LINDEX', KEYS[1], 0)
  if not first then break end
  local n = tonumber(string.match(first, '^(%d+)|')) or 0
  if total - n < keep then break end
  redis.call('LPOP', KEYS[1])
  total = redis.call('HINCRBY', KEYS[2], 'timeline_sections', -n)
end
return total
