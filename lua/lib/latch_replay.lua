-- latch_replay (included by the unlock scripts): a retry of a release that already ran
-- (same request id, so same latch key) returns what the first run returned, and does
-- nothing else.
-- Expects  local latch  the unlock latch redisson_unlock_latch:{N}:<rid>
-- Leaves   nothing defined.
local done = redis.call('get', latch)
if done ~= false then
    return tonumber(done)
end
