-- The ledger: the truth every measurement is read from. Written by an atomic
-- script so no variant's lock (or lack of one) can bend the counts.
--   ledger: hash initial, sold, duplicates, busy, replays, lost_locks,
--           renewals, fence_seen, fenced_rejections
--   units:  hash unit number -> times sold
--   served: hash instance -> requests answered
local function record(ledger, units, served, instance, outcome, unit)
  redis.call('HINCRBY', served, instance, 1)
  if outcome == 'sold' then
    redis.call('HINCRBY', ledger, 'sold', 1)
    -- The second sale of a unit makes it a duplicate; the third does not count again.
    if redis.call('HINCRBY', units, unit, 1) == 2 then
      redis.call('HINCRBY', ledger, 'duplicates', 1)
    end
  elseif outcome == 'busy' then
    redis.call('HINCRBY', ledger, 'busy', 1)
  elseif outcome == 'replay' then
    redis.call('HINCRBY', ledger, 'replays', 1)
  end
end
