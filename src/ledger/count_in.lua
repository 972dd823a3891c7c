-- One instance's count-in of a SKU: the answers it gave without writing
-- to Redis (unknown ones, its share of served ones, sold-out mark
-- refusals) and its critical sections, as one step applied at most once.
-- A count-in whose answer never came is sent again as it was, with the
-- same number; the instance sends nothing newer for the SKU until one of
-- them is answered, so a number not above the last one applied is a copy
-- (the first attempt ran after all, late): it changes nothing.
-- KEYS: ledger, served, sections
-- ARGV: instance, its counter (the instance's name and a nonce of its
-- process: a restarted instance counts anew), number (increasing per
-- counter and SKU), unknown,
-- served, mark refusals, sections' batch ("COUNT|JSON"; '' for none), its
-- count, how many sections the timeline keeps, replays and busy answers
-- (of variants that record nothing in Redis: the database's)
-- Returns 1 when applied, 0 for a copy.
local field = 'counted_in:' .. ARGV[2]
local number = tonumber(ARGV[3])
if not (number and tonumber(ARGV[4]) and tonumber(ARGV[5]) and tonumber(ARGV[6])
  and tonumber(ARGV[8]) and tonumber(ARGV[9]) and tonumber(ARGV[10]) and tonumber(ARGV[11])) then
  error('bad numbers: nothing written')
end
local last = tonumber(redis.call('HGET', KEYS[1], field) or '0') or 0
if number <= last then return 0 end
redis.call('HSET', KEYS[1], field, ARGV[3])
if ARGV[4] ~= '0' then redis.call('HINCRBY', KEYS[1], 'unknown', ARGV[4]) end
if ARGV[5] ~= '0' then redis.call('HINCRBY', KEYS[2], ARGV[1], ARGV[5]) end
if ARGV[6] ~= '0' then redis.call('HINCRBY', KEYS[1], 'mark_refusals', ARGV[6]) end
if ARGV[10] ~= '0' then redis.call('HINCRBY', KEYS[1], 'replays', ARGV[10]) end
if ARGV[11] ~= '0' then redis.call('HINCRBY', KEYS[1], 'busy', ARGV[11]) end
if ARGV[7] ~= '' then append_sections(KEYS[3], KEYS[1], ARGV[7], ARGV[8], ARGV[9]) end
return 1
