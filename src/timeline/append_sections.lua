-- Appends one instance's batch of critical sections to a SKU's timeline,
-- then drops the oldest batches while the rest still hold `keep` sections.
-- One list element per batch (not per section): a flush costs Redis one
-- element however many sections it carries.
-- sections: the list of "COUNT|JSON" batches; ledger: its
-- 'timeline_sections' field counts what the list holds (a reset clears it
-- with the list); batch: "COUNT|JSON"; count, keep: numbers.
-- Checks its numbers before the first write (Redis keeps the writes a
-- script made before an error); callers check theirs before calling it.
-- Returns the sections the list holds.
local function append_sections(sections, ledger, batch, count, keep)
  keep = tonumber(keep)
  if not (keep and tonumber(count)) then error('bad count or keep: nothing written') end
  redis.call('RPUSH', sections, batch)
  local total = redis.call('HINCRBY', ledger, 'timeline_sections', count)
  while total > keep do
    local first = redis.call('LINDEX', sections, 0)
    if not first then break end
    local n = tonumber(string.match(first, '^(%d+)|')) or 0
    if total - n < keep then break end
    redis.call('LPOP', sections)
    total = redis.call('HINCRBY', ledger, 'timeline_sections', -n)
  end
  return total
end
