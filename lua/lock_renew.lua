-- lock_renew: batched lease renewal for exclusive holds (RLock, fair, fenced, write),
-- the form of Redisson 3.44+ (PROTOCOL.md 6). Also used for an explicit extend.
-- KEYS[i]    lock hash N_i (1 <= i <= #KEYS, at most 100 per call)
-- ARGV[1]    new TTL in ms (>= 1)
-- ARGV[i+1]  owner field F_i whose hold on N_i is renewed
-- Returns    array r with r[i] = 1 when N_i has field F_i (its TTL is now ARGV[1]),
--            r[i] = 0 when the hold is gone (expired, deleted, or N_i is not a hash).
--            A renewal never creates a key.
local result = {}
for i = 1, #KEYS do
    local renewed = redis.pcall('hexists', KEYS[i], ARGV[i + 1]) == 1
    if renewed then
        redis.call('pexpire', KEYS[i], ARGV[1])
    end
    result[i] = renewed and 1 or 0
end
return result
