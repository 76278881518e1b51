-- fenced_renew: batched lease renewal for fenced holds (PROTOCOL.md 6, 9). Like
-- lock_renew, and a hold whose token counter vanished (Java's delete() removes it and
-- tokens start again at 1) counts as gone: its holder can no longer prove it is newest.
-- KEYS[2i-1] lock hash N_i;  KEYS[2i] its token counter redisson_lock_token:{N_i}
-- ARGV[1]    new TTL in ms (>= 1)
-- ARGV[i+1]  owner field F_i whose hold on N_i is renewed
-- Returns    array r with r[i] = 1 when N_i has field F_i and its counter exists (N_i's
--            TTL is now ARGV[1]); r[i] = 0 otherwise (nothing written). Never creates a key.
local result = {}
for i = 1, #KEYS / 2 do
    local n, t = KEYS[2 * i - 1], KEYS[2 * i]
    local renewed = redis.pcall('hexists', n, ARGV[i + 1]) == 1 and
                    redis.call('exists', t) == 1
    if renewed then
        redis.call('pexpire', n, ARGV[1])
    end
    result[i] = renewed and 1 or 0
end
return result
