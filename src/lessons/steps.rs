//! The lesson path: article 001's story told as eleven experiments, in its
//! order, and two past its end (the same script, one round trip for many
//! buyers; and the question that follows the story: why not let the
//! database guard the stock?). Each step names a variant and a lab scenario; the `Lessons` page
//! runs that pair on the live stack (`stocklock lab --variant V --scenario S`)
//! and shows the lab's cell next to the SKU's timeline, so that every claim
//! of the story is seen happening rather than read.

/// One step of the lesson path.
pub struct Step {
    /// Stable id, in the URL and the page's data-step.
    pub id: &'static str,
    /// The variant the experiment runs (a name of crate::variants::Variant).
    pub variant: &'static str,
    /// The lab scenario it plays (a name of crate::lab::Scenario).
    pub scenario: &'static str,
    pub title: &'static str,
    pub title_zh: &'static str,
    /// Two or three sentences.
    pub text: &'static str,
    pub text_zh: &'static str,
    /// The five (or so) lines of code that matter, real code of this project (Rust, Lua or the Redis commands), short.
    pub code: &'static str,
    /// What to look at in the timeline after the run (one sentence).
    pub look: &'static str,
    pub look_zh: &'static str,
    /// What to do by hand in step mode, on the same cell (one sentence).
    pub goal: &'static str,
    pub goal_zh: &'static str,
}

/// The path, in article 001's order, then the steps past its end.
pub const STEPS: [Step; 13] = [
    Step {
        id: "one-instance",
        variant: "local-mutex",
        scenario: "one-instance",
        title: "One instance: a process mutex is enough",
        title_zh: "单个实例:进程内的互斥锁就够了",
        text: "400 buyers (64 at a time, 2 ms of work each) compete for 50 units, and this time every request goes to the same instance. \
            The local-mutex variant wraps the critical section in a per-SKU tokio mutex, this project's version of Java's synchronized, \
            so the requests take turns: the stock reaches zero and nothing is oversold.",
        text_zh: "400 个买家(每次 64 个并发,每人业务耗时 2 毫秒)抢 50 件商品,这一次所有请求都打到同一个实例上。\
            local-mutex 变体用每个 SKU 一把的 `tokio` 互斥锁包住临界区,相当于本项目里的 Java `synchronized`,\
            请求只能轮流执行:库存卖到 0,没有任何超卖。",
        code: r#"// src/variants/local_mutex.rs
let in_use = self.by_sku.use_key(&ctx.keys.stock);
let held = tokio::time::timeout(wait, in_use.lock()).await;
let Ok(_held) = held else {
    return not_acquired(wait);
};
let answer = critical_section(ctx, unguarded()).await;"#,
        look: "Every section in the timeline comes from one instance, and no two of them overlap.",
        look_zh: "时间线上的所有临界区都来自同一个实例,任意两个都不重叠。",
        goal: "Try every order you like: with one instance, no two buyers can sell the same unit.",
        goal_zh: "随便按什么顺序试:只有一个实例时,两个买家卖不出同一件商品。",
    },
    Step {
        id: "two-instances",
        variant: "local-mutex",
        scenario: "race",
        title: "Two instances behind nginx: the mutex stops protecting",
        title_zh: "nginx 后面两个实例:互斥锁不再起作用",
        text: "The same race now goes through nginx, which spreads the buyers over two instances. \
            Each process has a mutex of its own, so a request on instance a and a request on instance b sit in the critical section together, \
            read the same stock and sell the same unit.",
        text_zh: "同样的抢购现在经过 nginx,买家被轮流分到两个实例上。\
            每个进程只认自己内存里的那把锁,于是实例 a 和实例 b 上的两个请求会同时待在临界区里,\
            读到同一个库存,卖出同一件商品。",
        code: r#"// src/variants/local_mutex.rs
pub(super) struct LocalMutex {
    by_sku: PerKey<tokio::sync::Mutex<()>>,
}
let held = tokio::time::timeout(wait, in_use.lock()).await;
let answer = critical_section(ctx, unguarded()).await;"#,
        look: "Find sections of instance a and instance b that overlap in time, and the oversold count above zero in the ledger.",
        look_zh: "找出实例 a 与实例 b 在时间上重叠的临界区,再看账本里大于零的超卖数。",
        goal: "Make two buyers, on two instances, sell the same unit.",
        goal_zh: "让两个位于不同实例上的买家卖出同一件商品。",
    },
    Step {
        id: "setnx",
        variant: "setnx",
        scenario: "race",
        title: "SETNX: one lock in Redis for every instance",
        title_zh: "SETNX:所有实例共用 Redis 里的一把锁",
        text: "The setnx variant takes the lock with SETNX lock:{sku} 1 in the Redis both instances share, gives it a lease with a separate PEXPIRE, and deletes it once the write is done. \
            A buyer who finds the lock taken is turned away at once (wait_ms=0, the article's return \"error\"), \
            so some stock may stay unsold, but no unit is sold twice.",
        text_zh: "setnx 变体在两个实例共用的 Redis 里用 `SETNX lock:{sku} 1` 加锁,再用一条单独的 `PEXPIRE` 设置租期,写完库存后删除锁。\
            发现锁已被占用的买家会被立即拒绝(`wait_ms=0`,对应文章里的 `return \"error\"`),\
            所以可能会剩下没卖出去的库存,但同一件商品绝不会卖两次。",
        code: r#"// src/variants/setnx.rs
while !ctx.conn.set_nx::<_, _, bool>(&keys.lock, 1).await? {
    if !spin.again().await {
        return not_acquired(wait);
    }
}
let _: bool = ctx.conn.pexpire(&keys.lock, lease_ms).await?;
let answer = critical_section(ctx, unguarded().leased(lease)).await;
let _: i64 = conn.del(&keys.lock).await?;"#,
        look: "The sections of both instances now follow one another without overlapping; the busy count is the buyers refused while the lock was held.",
        look_zh: "两个实例的临界区现在一个接一个,不再重叠;`busy` 数是锁被占用时被拒绝的买家。",
        goal: "Try to get two buyers past SETNX at once: only one ever holds the lock.",
        goal_zh: "试着让两个买家同时通过 SETNX:锁永远只有一个持有者。",
    },
    Step {
        id: "setnx-crash",
        variant: "setnx",
        scenario: "crash-after-acquire",
        title: "A crash between SETNX and EXPIRE: a lock that never expires",
        title_zh: "SETNX 与 EXPIRE 之间崩溃:一把永不过期的锁",
        text: "Chaos mode arms a crash: the next holder's process exits right after its SETNX succeeds and before its PEXPIRE is sent. \
            The lock key is left with no TTL and no living owner, so the buyer on the other instance waits for it in vain. \
            The SKU is deadlocked until someone deletes the key by hand, which the lab does once it has its verdict.",
        text_zh: "混沌模式预先埋下一次崩溃:下一个持有者在 SETNX 成功之后、PEXPIRE 发出之前进程就退出了。\
            锁键既没有过期时间,也没有活着的主人,另一个实例上的买家怎么等也拿不到它。\
            这个 SKU 就此死锁,直到有人手动删除这个键;实验拿到结论后会替你删掉。",
        code: r#"// src/variants/setnx.rs
while !ctx.conn.set_nx::<_, _, bool>(&keys.lock, 1).await? { /* ... */ }
// The gap the articles warn about: a crash here leaves a lock no one expires.
ctx.chaos
    .crash_if_armed_after_acquire(&mut ctx.conn, keys)
    .await?;
let _: bool = ctx.conn.pexpire(&keys.lock, lease_ms).await?;"#,
        look: "Find the crash event (between SETNX and EXPIRE) and notice that no sale follows it within the waiting window.",
        look_zh: "找到崩溃事件(发生在 SETNX 与 EXPIRE 之间),注意在整个等待窗口里它之后再也没有成交。",
        goal: "Crash the holder between its SETNX and its EXPIRE, and see that nobody sells again.",
        goal_zh: "在 SETNX 和 EXPIRE 之间让持有者崩溃,看看之后再也没有人能卖出。",
    },
    Step {
        id: "expiry-frees",
        variant: "setnx-expiry",
        scenario: "slow-business",
        title: "An expiry time, and a DEL that frees someone else's lock",
        title_zh: "有了过期时间,DEL 却删掉了别人的锁",
        text: "setnx-expiry stores the time the lock expires as its value, so a dead holder's lock counts as free once that time has passed and GETSET takes it over. \
            Here three buyers each work 600 ms under a 200 ms lease: the lock expires while the first one still works, the second takes it over, \
            and the first one's DEL then deletes the second one's lock and lets the third in, so several holders write the same stock and it oversells.",
        text_zh: "setnx-expiry 把锁的过期时刻写成锁的值,持有者死掉后,只要这个时刻过了,锁就算空闲,可以用 GETSET 接管。\
            这里三个买家每人业务耗时 600 毫秒,租期却只有 200 毫秒:第一个还在干活,锁就过期了,第二个把锁接管过去;\
            随后第一个执行 DEL,把第二个的锁删掉,又放了第三个进来,几个持有者写同一个库存,结果超卖。",
        code: r#"// src/variants/setnx_expiry.rs
let expires = now + lease_ms;
if ctx.conn.set_nx(lock, expires).await? {
    return Ok(true);
}
Some(current) if current < now => {
    let swapped: Option<i64> = ctx.conn.getset(lock, expires).await?;
    Ok(swapped == Some(current))
}
// No owner: this deletes whatever lock is there by now.
let released = ctx.conn.del::<_, i64>(&keys.lock).await;"#,
        look: "Look for sections that overlap although each of them believed it held the lock.",
        look_zh: "找出那些都以为自己持有锁、在时间上却彼此重叠的临界区。",
        goal: "Let the lease run out while A works, and make B sell the unit A is about to sell.",
        goal_zh: "在 A 执行业务时让租约到期,让 B 卖出 A 正要卖的那件商品。",
    },
    Step {
        id: "owner-token",
        variant: "token",
        scenario: "crash-after-acquire",
        title: "SET NX PX with an owner token",
        title_zh: "SET NX PX,再加上持有者 token",
        text: "The token variant sets the lock and its lease in one command, SET lock:{sku} <token> NX PX lease, with a value unique to the request, so no crash can leave a lock without a TTL. \
            Its release is a Lua script that deletes the key only while it still holds that token. \
            When the holder crashes right after acquiring (lease 1 s), its lock simply runs out after the lease and the buyer on the other instance gets it.",
        text_zh: "token 变体用一条命令同时加锁并设置租期:`SET lock:{sku} <token> NX PX lease`,值是每个请求独有的 token,所以任何崩溃都不会留下没有过期时间的锁。\
            释放时执行一个 Lua 脚本,只有键里还是自己的 token 才删除。\
            持有者加锁后立刻崩溃时(租期 1 秒),它的锁在租期结束后自然失效,另一个实例上的买家随之拿到锁。",
        code: r#"// crates/stocklock-lock/src/lease.rs: SET lock:{sku} <token> NX PX lease
let options = SetOptions::default()
    .conditional_set(redis::ExistenceCheck::NX)
    .with_expiration(SetExpiry::PX(millis(lease)));
-- crates/stocklock-lock/src/scripts/lease_release.lua
if redis.call('TYPE', KEYS[1])['ok'] == 'string' and redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])"#,
        look: "About one lease (1 s) after the crash event, a section on the other instance begins and sells.",
        look_zh: "崩溃事件之后大约一个租期(1 秒),另一个实例上的临界区开始并成功售出。",
        goal: "Crash the holder, let its lease run out, and let another buyer sell.",
        goal_zh: "让持有者崩溃,等它的租约到期,再让另一个买家卖出。",
    },
    Step {
        id: "lease-runs-out",
        variant: "token",
        scenario: "slow-business",
        title: "The lease still runs out",
        title_zh: "租期照样会用完",
        text: "The owner token stops a holder from deleting someone else's lock, but it cannot make the lease outlast the work. \
            With 600 ms of work under a 200 ms lease, the lock expires in the middle of the business, the next buyer takes it quite legitimately, and both write the same stock. \
            The late holder's release script finds a token that is not its own and deletes nothing, but by then the oversell has happened.",
        text_zh: "持有者 token 能防止删掉别人的锁,却没法让租期比业务更长。\
            业务 600 毫秒、租期 200 毫秒,锁在业务进行到一半时到期,下一个买家完全合法地拿到锁,两人都写了同一个库存。\
            迟到的持有者释放时,脚本发现 token 已不是自己的,什么也不删,可超卖已经发生了。",
        code: r#"// src/variants/token.rs
// No local deadline on purpose: this is the articles' SET NX PX lock,
let guard = Guard {
    holder: Some(owner.as_str()),
    fence: None,
    still_held: || true,
    lease: Some(lease),
};
let answer = critical_section(ctx, guard).await;"#,
        look: "Compare each section with its 200 ms lease: the next section starts when the lease ends, while the previous one is still running.",
        look_zh: "把每个临界区和它 200 毫秒的租期对比:租期一到,下一个临界区就开始了,而上一个还没结束。",
        goal: "Let A's lease run out while it works, let B take the lock, and let both write.",
        goal_zh: "在 A 执行业务时让它的租约到期,让 B 拿到锁,然后让两人都写入。",
    },
    Step {
        id: "watchdog",
        variant: "watchdog",
        scenario: "slow-business",
        title: "A watchdog renews the lease",
        title_zh: "看门狗为锁续期",
        text: "The watchdog variant is this project's take on Redisson's RLock: a reentrant lock kept in a hash, and a task that renews the lease every lease/3 while its owner works. \
            The same three buyers with 600 ms of work under a 200 ms lease now wait their turn, because the lock lives exactly as long as its holder keeps working. \
            If the holder's process dies, the renewals stop with it and the lock frees itself after one lease.",
        text_zh: "watchdog 变体是本项目版的 Redisson `RLock`:锁存放在一个可重入的 `hash` 里,另有一个任务在持有者干活期间每 lease/3 续一次租期。\
            同样是三个买家、600 毫秒的业务、200 毫秒的租期,现在他们依次排队,因为只要持有者还在干活,锁就一直有效。\
            持有者进程一旦死掉,续期随之停止,锁在一个租期后自动释放。",
        code: r#"// crates/stocklock-lock/src/watchdog.rs
let every = (lease / 3).max(Duration::from_millis(1));
_ = ticks.tick() => {}
let lost = match lock.renew(&owner, lease).await {
-- crates/stocklock-lock/src/scripts/reentrant_renew.lua
if redis.call('TYPE', KEYS[1])['ok'] == 'hash' and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])"#,
        look: "Each section now lasts longer than its lease and carries renewal marks, and still no two sections overlap.",
        look_zh: "每个临界区都比租期长,上面带着续期标记,而任意两个临界区仍然互不重叠。",
        goal: "Try to make a working holder's lease run out: its watchdog renews it first.",
        goal_zh: "试着让正在工作的持有者租约到期:看门狗会先续期。",
    },
    Step {
        id: "pause",
        variant: "watchdog",
        scenario: "pause-holder",
        title: "A stop-the-world pause beats the watchdog",
        title_zh: "全进程停顿打败了看门狗",
        text: "Right after its last check of the lock and just before its write, the holder's whole process is frozen with SIGSTOP for 1.5 s, five times its 300 ms lease. \
            The watchdog freezes with it, so the lease runs out and the buyer on the other instance takes the lock and sells. \
            When the frozen holder wakes up it writes anyway, because it has no way to learn in time that the lock is gone: it oversells.",
        text_zh: "持有者最后一次检查锁之后、写库存之前,整个进程被 SIGSTOP 冻结 1.5 秒,是 300 毫秒租期的五倍。\
            看门狗跟着一起被冻住,租期到期,另一个实例上的买家拿到锁并卖出。\
            被冻结的持有者醒来后照样写入,它根本来不及知道锁已经没了:超卖。",
        code: r#"// src/section.rs
if !(guard.still_held)() {
    return unrecorded(Outcome::Busy(BusyReason::LockLost));
}
if let Some(pause) = faults.pause {
    // After the last check, before the write: whatever the lock learns
    // while the process is frozen comes too late.
    ctx.chaos.stop_the_world(pause);
}
let sale = write(ctx, current, &epoch, guard.fence).await;"#,
        look: "Find the freeze event and the two sections around it, one per instance, that overlap.",
        look_zh: "找到冻结(`freeze`)事件,以及它前后分属两个实例、彼此重叠的两个临界区。",
        goal: "Freeze the holder past its lease, let B take the lock, then wake A before its write.",
        goal_zh: "冻结持有者直到租约过期,让 B 拿到锁,然后在 A 写入前唤醒它。",
    },
    Step {
        id: "fencing",
        variant: "fenced",
        scenario: "pause-holder",
        title: "Fencing tokens: the store says no",
        title_zh: "fencing token:由存储来拒绝",
        text: "The fenced variant adds a number to the watchdog lock: the acquire script takes INCR fence:{sku} in the same step as the grant, and the stock is read and written only through Lua scripts that refuse a token older than the newest they have seen. \
            The same 1.5 s pause still happens, but when the stale holder wakes up its write carries the old token and Redis refuses it. \
            The ledger stays exact, and the refusal is counted as a stale token.",
        text_zh: "fenced 变体给看门狗锁加上一个编号:加锁脚本在授予锁的同一步里执行 `INCR fence:{sku}`,而库存的读和写都只能经过 Lua 脚本,脚本拒绝比已见过的最新编号更旧的 token。\
            同样 1.5 秒的停顿照样发生,但过期的持有者醒来后,写入带的是旧 token,Redis 直接拒绝。\
            账本保持准确,这次拒绝被记为一次过期 token(`stale_token`)。",
        code: r#"-- crates/stocklock-lock/src/scripts/reentrant_acquire.lua (the grant)
if ARGV[3] == '1' then token = redis.call('INCR', KEYS[2]) end
-- src/scripts/fence.lua (every read and write of the stock)
local kept = redis.call('HMGET', ledger, seen_field, store_field)
local same_store = (kept[2] or '') == store
local seen = 0
if same_store then seen = tonumber(kept[1] or '0') end
if number < seen then
  redis.call('HINCRBY', ledger, 'fenced_rejections', 1)
  return false
end"#,
        look: "The sections still overlap around the freeze, but the stale holder's ends refused (`busy`, `stale_token`) instead of sold, and oversold stays at 0.",
        look_zh: "冻结前后的临界区依然重叠,但过期持有者那一段以拒绝(`busy`, `stale_token`)结束而不是售出,超卖保持为 0。",
        goal: "Freeze the holder and let B in: try to make the stale holder's write land.",
        goal_zh: "冻结持有者并让 B 进来:试着让过期持有者的写入生效。",
    },
    Step {
        id: "lua",
        variant: "lua",
        scenario: "race",
        title: "Or no lock at all: one Lua script",
        title_zh: "或者干脆不用锁:一个 Lua 脚本",
        text: "Article 001 ends by noting that reading and writing the stock should itself be atomic. \
            The lua variant does exactly that: one script decrements, checks and records the sale, and Redis runs it to the end before serving anything else, so there is no gap for a second buyer to slip into. \
            The two-instance race sells its 50 units once each, with no lock, no lease and a single round trip per buyer.",
        text_zh: "文章 001 结尾提到,读库存和写库存这两步本身也应该是原子的。\
            lua 变体正是这么做的:一个脚本完成扣减、检查和记账,Redis 执行完这个脚本才会处理别的命令,第二个买家根本无缝可钻。\
            两个实例的同一场抢购,50 件商品每件恰好卖出一次,没有锁,没有租期,每个买家只需一次往返。",
        code: r#"-- src/scripts/deduct_one.lua (the sale deduct.lua runs)
local stock = tonumber(redis.call('GET', KEYS[1]) or '0')
if stock <= 0 then
  return done(0, 0, stock)
end
local offset = unit_offset(l[1], unit)
redis.call('DECR', KEYS[1])
local sale = redis.call('HINCRBY', KEYS[2], 'sold', '1')
sold_unit(KEYS[2], KEYS[3], offset)"#,
        look: "Every section is a single atomic step, none overlaps another, and sold equals the initial stock with 0 remaining.",
        look_zh: "每个临界区都只是一个原子步骤,没有任何重叠;已售数等于初始库存,剩余为 0。",
        goal: "Try every order of two buyers: the one script sells each unit once.",
        goal_zh: "试遍两个买家的所有顺序:一个脚本让每件商品只卖一次。",
    },
    Step {
        id: "lua-batch",
        variant: "lua-batch",
        scenario: "race",
        title: "When the round trip is the cost",
        title_zh: "当往返本身就是成本",
        text: "The lua script is safe and does only a few microseconds of work inside Redis, so most of what a sale costs is the round trip to Redis and back. \
            The lua-batch variant sends the buyers of a SKU that queued at an instance while its previous call was in flight together, in one call of the same script (a group commit), and each of them still gets a unit or a sold-out answer of its own. \
            There is no timer, so a lone buyer waits for nobody, and the verdict is the same as lua's: the race sells its 50 units once each.",
        text_zh: "lua 脚本是安全的,在 Redis 里只做几微秒的工作,所以一次销售的大部分成本是到 Redis 的一次往返。\
            lua-batch 变体把上一次调用在途期间、在同一实例上排队的同一 SKU 的买家放在一起,用同一个脚本的一次调用发出去(组提交),每个买家仍然得到属于自己的一件商品或售罄答复。\
            这里没有定时器,单个买家不用等任何人;结论和 lua 一样:这场抢购的 50 件商品每件恰好卖出一次。",
        code: r#"// src/variants/lua_batch/mod.rs: nothing in flight, so this buyer goes now
if lane.push(buyer) {
while let Some(batch) = lane.next(max) {
-- src/scripts/deduct_batch.lua: one call, every buyer decided on one read
  local sold = math.min(math.max(stock, 0), n)
  for k = 1, n do
    if k <= sold then emit(1, stock - k + 1, stock - k) else emit(0, 0, stock - sold) end
  end
-- The batch's sales: `sold` units from the stock's top one down (units
  redis.call('DECRBY', KEYS[1], sold)
  redis.call('HINCRBY', KEYS[2], 'sold', sold)"#,
        look: "The sections of one batch come from one instance and share one moment (the script's single TIME), and still no two sections overlap.",
        look_zh: "同一批的临界区来自同一个实例,共用同一个时刻(脚本里唯一的一次 TIME),任意两个临界区仍然互不重叠。",
        goal: "Try every order: a batch's script sells each unit once too.",
        goal_zh: "试遍所有顺序:批量脚本同样让每件商品只卖一次。",
    },
    Step {
        id: "database",
        variant: "pg-update",
        scenario: "race",
        title: "Why not just the database?",
        title_zh: "为什么不直接交给数据库?",
        text: "Most shops already keep their stock in a relational database, so why not let it guard the stock? \
            The pg-update variant does in PostgreSQL what the lua script does in Redis: one conditional UPDATE takes a unit only where one is left, and writes the sale and the request id's answer in the same statement; the row's lock makes the statement atomic, and the same two-instance race sells its 50 units once each. \
            The price is the hot row: every buyer of the SKU queues on that one row's lock, and each sale costs the database far more than a script costs Redis, which the bench's pg-update-vs-lua row measures side by side on one stack.",
        text_zh: "大多数商店本来就把库存存在关系型数据库里,为什么不让数据库来守护库存?\
            pg-update 变体在 PostgreSQL 里做的正是 lua 脚本在 Redis 里做的事:一条带条件的 UPDATE 只在还有库存时扣减一件,并在同一条语句里写入这次售出和请求 id 的答复;行锁让这条语句是原子的,同样的两个实例的抢购,50 件商品每件恰好卖出一次。\
            代价是热点行:这个 SKU 的所有买家都在同一行的锁上排队,每次售出让数据库付出的代价远高于一个脚本让 Redis 付出的;`bench` 的 `pg-update-vs-lua` 一行在同一个栈上把两者并排量出来。",
        code: r#"// src/pgstock/sale.rs
const UNIT_LEFT: &str = "remaining > 0";
let sold = c
    .query_opt(
        &sale_statement("remaining - 1", unit_left, "remaining + 1"),
        &[&buyer.sku, &buyer.request_id, &buyer.instance],
// src/pgstock/statements.rs
    UPDATE stock SET remaining = {new_remaining}, sold = sold + 1, version = version + 1
    WHERE sku = $1 AND {condition}
    RETURNING epoch, sold, remaining, {unit} AS unit"#,
        look: "Every section is one statement's moment in the database, none overlaps another, and sold equals the initial stock with 0 remaining: safe like lua, and the bench shows what the one row costs.",
        look_zh: "每个临界区都是数据库里一条语句的时刻,没有任何重叠;已售数等于初始库存,剩余为 0:和 lua 一样安全,而那一行的代价由 `bench` 量出。",
        goal: "Try every order of two buyers: the conditional UPDATE sells each unit once.",
        goal_zh: "试遍两个买家的所有顺序:带条件的 UPDATE 让每件商品只卖一次。",
    },
];

/// The step with this id.
impl Step {
    /// Whether a classroom seat may run it on SKUs of its own: its scenario
    /// touches nothing but its SKU ([`crate::lab::Scenario::per_sku`]).
    pub fn seats_may_run(&self) -> bool {
        (self.scenario.parse::<crate::lab::Scenario>()).is_ok_and(crate::lab::Scenario::per_sku)
    }
}

pub fn find(id: &str) -> Option<&'static Step> {
    let steps: &'static [Step; 13] = &STEPS;
    steps.iter().find(|step| step.id == id)
}
