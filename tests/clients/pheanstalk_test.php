<?php
/*
 * Client-compatibility test: drives Debian's unmodified Pheanstalk 4
 * (php-pda-pheanstalk) against a beanstalkd-compatible server and checks every
 * answer it gets back. The program starts the server binary named by argv[1]
 * on a free loopback port, runs a realistic workload through the public
 * Pheanstalk API only (no raw protocol), and kills the server when done. It
 * prints one line per check; it exits 0 when all checks pass and 1 with the
 * failing step otherwise.
 *
 *   php pheanstalk_test.php /path/to/beanstalkd-ha
 *   php pheanstalk_test.php /usr/bin/beanstalkd     # validates the test itself
 *
 * Pheanstalk's YAML reader is a line splitter: it keeps the double quotes that
 * beanstalkd 1.13 (and this server) put around string values such as
 * `name: "default"`, and 1.12 does not. String stats are compared unquoted.
 */

declare(strict_types=1);

require '/usr/share/php/Pheanstalk/autoload.php';

use Pheanstalk\Contract\ResponseInterface;
use Pheanstalk\Exception\DeadlineSoonException;
use Pheanstalk\Exception\JobNotFoundException;
use Pheanstalk\Exception\JobTooBigException;
use Pheanstalk\Exception\ServerBadFormatException;
use Pheanstalk\Exception\ServerException;
use Pheanstalk\Job;
use Pheanstalk\JobId;
use Pheanstalk\Pheanstalk;

final class CheckFailed extends RuntimeException
{
}

const STARTUP_DEADLINE = 10.0;  // seconds to wait for the server to accept
const POLL_US = 20000;          // microseconds between polls
const WATCHDOG_SECONDS = 240;   // whole-run limit; a hang is reported, not waited out
const PC_JOBS = 1000;           // jobs moved by the producer/consumer pair

$GLOBALS['step'] = 'startup';
$GLOBALS['checks'] = 0;
$GLOBALS['puts'] = 0;
$GLOBALS['server_pid'] = 0;
$GLOBALS['owner_pid'] = getmypid();

function step(string $name): void
{
    $GLOBALS['step'] = $name;
    echo "== $name\n";
}

function show($value): string
{
    $text = is_string($value) ? json_encode(mb_strlen($value, '8bit') > 40 ?
        sprintf('<%d bytes>', mb_strlen($value, '8bit')) : $value, JSON_INVALID_UTF8_SUBSTITUTE)
        : var_export($value, true);
    $text = str_replace("\n", ' ', $text);
    return strlen($text) > 120 ? substr($text, 0, 100) . '...' : $text;
}

function check(string $what, $expected, $got): void
{
    if ($expected !== $got) {
        throw new CheckFailed("$what: expected " . show($expected) . ', got ' . show($got));
    }
    $GLOBALS['checks']++;
    echo "  ok  $what = " . show($got) . "\n";
}

function checkRange(string $what, $lo, $hi, $got): void
{
    if (!is_int($got) && !is_float($got) || $got < $lo || $got > $hi) {
        throw new CheckFailed("$what: expected $lo..$hi, got " . show($got));
    }
    $GLOBALS['checks']++;
    echo "  ok  $what = " . show($got) . " (in $lo..$hi)\n";
}

function expectThrow(string $what, string $class, callable $fn)
{
    try {
        $fn();
    } catch (Throwable $e) {
        if (!($e instanceof $class)) {
            throw new CheckFailed("$what: expected $class, got " . get_class($e) . ': ' .
                $e->getMessage());
        }
        $GLOBALS['checks']++;
        echo "  ok  $what threw " . substr(strrchr('\\' . get_class($e), '\\'), 1) . "\n";
        return $e;
    }
    throw new CheckFailed("$what: expected $class, nothing was thrown");
}

function unquote(string $value): string
{
    $n = strlen($value);
    $quoted = $n >= 2 && $value[0] === '"' && $value[$n - 1] === '"';
    return $quoted ? substr($value, 1, -1) : $value;
}

// Compares YAML fields: int => decimal integer, [lo, hi] => integer range, string => unquoted.
function checkFields(string $what, ResponseInterface $resp, array $expected): void
{
    foreach ($expected as $key => $want) {
        $raw = $resp[$key] ?? null;
        $label = "$what $key";
        if ($raw === null) {
            throw new CheckFailed("$label: field missing");
        }
        if (is_string($want)) {
            check($label . ($raw === unquote($raw) ? '' : ' (quoted on the wire)'), $want,
                unquote($raw));
            continue;
        }
        if (!preg_match('/^\d+$/', $raw)) {
            throw new CheckFailed("$label: expected an integer, got " . show($raw));
        }
        is_array($want) ? checkRange($label, $want[0], $want[1], (int) $raw)
                        : check($label, $want, (int) $raw);
    }
}

function now(): float
{
    return hrtime(true) / 1e9;
}

// Waits for a condition with a deadline; returns the first truthy value of $fn.
function waitUntil(string $what, float $seconds, callable $fn)
{
    $limit = now() + $seconds;
    while (true) {
        $value = $fn();
        if ($value !== false && $value !== null) {
            return $value;
        }
        if (now() > $limit) {
            throw new CheckFailed("$what: not reached within $seconds s");
        }
        usleep(POLL_US);
    }
}

// ------------------------------------------------------------------ server ---

function freePort(): int
{
    $sock = socket_create(AF_INET, SOCK_STREAM, SOL_TCP);
    if ($sock === false || !socket_bind($sock, '127.0.0.1', 0) ||
        !socket_getsockname($sock, $addr, $port)) {
        throw new CheckFailed('cannot pick a free port');
    }
    socket_close($sock);
    return $port;
}

function startServer(string $binary, int $port): int
{
    $pid = pcntl_fork();
    if ($pid < 0) {
        throw new CheckFailed('fork failed');
    }
    if ($pid === 0) {
        posix_setpgid(0, 0);
        pcntl_exec($binary, ['-l', '127.0.0.1', '-p', (string) $port]);
        fwrite(STDERR, "exec $binary failed\n");
        posix_kill(getmypid(), SIGKILL);
    }
    $GLOBALS['server_pid'] = $pid;
    return $pid;
}

function serverExited(int $pid): bool
{
    return pcntl_waitpid($pid, $status, WNOHANG) !== 0;
}

function waitForAccept(int $pid, int $port): void
{
    $limit = now() + STARTUP_DEADLINE;
    while (true) {
        if (serverExited($pid)) {
            throw new CheckFailed('server exited during startup');
        }
        $conn = @stream_socket_client("tcp://127.0.0.1:$port", $errno, $errstr, 1);
        if ($conn !== false) {
            fclose($conn);
            return;
        }
        if (now() > $limit) {
            throw new CheckFailed("server not accepting on port $port after 10 s");
        }
        usleep(POLL_US);
    }
}

function stopServer(): void
{
    $pid = $GLOBALS['server_pid'];
    if ($pid > 0 && getmypid() === $GLOBALS['owner_pid']) {
        posix_kill($pid, SIGKILL);
        pcntl_waitpid($pid, $status);
        $GLOBALS['server_pid'] = 0;
    }
}

// ----------------------------------------------------------------- helpers ---

function put(Pheanstalk $p, string $body, int $pri = 1024, int $delay = 0, int $ttr = 60): int
{
    $job = $p->put($body, $pri, $delay, $ttr);
    $GLOBALS['puts']++;
    check('put ' . show($body) . ' into ' . $p->listTubeUsed() . ': id > 0', true,
        $job->getId() > 0);
    return $job->getId();
}

function reserveBody(string $what, Pheanstalk $p, ?int $timeout, string $body): Job
{
    $job = $timeout === null ? $p->reserve() : $p->reserveWithTimeout($timeout);
    if ($job === null) {
        throw new CheckFailed("$what: TIMED_OUT, expected body " . show($body));
    }
    check("$what: reserved body", $body, $job->getData());
    return $job;
}

function tubeNames(array $names): array
{
    sort($names, SORT_STRING);
    return $names;
}

// ---------------------------------------------------------------- workload ---

function phaseInitial(Pheanstalk $p, Pheanstalk $p2, int $pid): void
{
    step('fresh server: stats, list-tubes, list-tube-used, list-tubes-watched');
    check('second connection list-tube-used', 'default', $p2->listTubeUsed(true));
    waitUntil('current-connections is 2 (startup probe gone)', 5,
        fn () => $p->stats()['current-connections'] === '2');
    $stats = $p->stats();
    check('stats version is non-empty', true, unquote($stats['version']) !== '');
    checkFields('stats', $stats, ['pid' => $pid, 'current-jobs-ready' => 0, 'total-jobs' => 0,
        'current-tubes' => 1, 'max-job-size' => 65535, 'current-connections' => 2]);
    check('list-tubes', ['default'], $p->listTubes());
    check('list-tube-used', 'default', $p->listTubeUsed(true));
    check('list-tubes-watched', ['default'], $p->listTubesWatched(true));
}

function phasePut(Pheanstalk $p, array &$ids): void
{
    step('put to several tubes with pri/delay/ttr');
    $p->useTube('bq-alpha');
    $ids['a_high'] = put($p, 'a-high', 5, 0, 30);
    $ids['a_mid'] = put($p, 'a-mid', 50, 0, 30);
    $ids['a_low'] = put($p, 'a-low', 100, 0, 30);
    check('job ids increase by one', [$ids['a_high'] + 1, $ids['a_high'] + 2],
        [$ids['a_mid'], $ids['a_low']]);
    $p->useTube('bq_beta');
    $ids['b_delayed'] = put($p, 'b-delayed', 10, 3600, 60);
    $ids['b_ready'] = put($p, 'b-ready', 2000, 0, 60);
    checkFields('stats', $p->stats(), ['current-jobs-ready' => 4, 'current-jobs-urgent' => 3,
        'current-jobs-delayed' => 1, 'current-jobs-reserved' => 0, 'current-jobs-buried' => 0,
        'total-jobs' => 5, 'cmd-put' => 5, 'current-tubes' => 3]);
    checkFields('stats-tube bq-alpha', $p->statsTube('bq-alpha'), ['name' => 'bq-alpha',
        'current-jobs-ready' => 3, 'current-jobs-urgent' => 3, 'total-jobs' => 3,
        'current-using' => 0, 'current-watching' => 0]);
    checkFields('stats-tube bq_beta', $p->statsTube('bq_beta'), ['name' => 'bq_beta',
        'current-jobs-ready' => 1, 'current-jobs-urgent' => 0, 'current-jobs-delayed' => 1,
        'total-jobs' => 2, 'current-using' => 1]);
    check('list-tubes', ['bq-alpha', 'bq_beta', 'default'], tubeNames($p->listTubes()));
    check('list-tube-used (asked)', 'bq_beta', $p->listTubeUsed(true));
    checkFields('stats-job delayed', $p->statsJob(new JobId($ids['b_delayed'])), [
        'id' => $ids['b_delayed'], 'state' => 'delayed', 'pri' => 10, 'delay' => 3600,
        'ttr' => 60, 'tube' => 'bq_beta', 'reserves' => 0]);
}

function phasePeek(Pheanstalk $p, array $ids): void
{
    step('peek ready/delayed/buried (used tube) and peek by id');
    $p->useTube('bq-alpha');
    check('peek-ready bq-alpha (lowest pri first)', 'a-high', $p->peekReady()->getData());
    check('peek-delayed bq-alpha (none)', null, $p->peekDelayed());
    $p->useTube('bq_beta');
    check('peek-delayed bq_beta', $ids['b_delayed'], $p->peekDelayed()->getId());
    check('peek-buried bq_beta (none)', null, $p->peekBuried());
    check('peek by id', 'a-low', $p->peek(new JobId($ids['a_low']))->getData());
    expectThrow('peek unknown id', JobNotFoundException::class,
        fn () => $p->peek(new JobId($ids['a_high'] + 1000000)));
}

function phaseReserveDelete(Pheanstalk $p, array $ids): void
{
    step('reserve (no timeout) and delete');
    $p->watchOnly('bq-alpha');
    check('list-tubes-watched after watchOnly', ['bq-alpha'], $p->listTubesWatched(true));
    $job = reserveBody('reserve', $p, null, 'a-high');
    check('reserved id', $ids['a_high'], $job->getId());
    checkFields('stats-job reserved', $p->statsJob($job), ['state' => 'reserved', 'pri' => 5,
        'reserves' => 1, 'ttr' => 30, 'tube' => 'bq-alpha', 'time-left' => [28, 30]]);
    checkFields('stats', $p->stats(), ['current-jobs-reserved' => 1, 'current-jobs-ready' => 3]);
    $p->delete($job);
    expectThrow('peek deleted job', JobNotFoundException::class, fn () => $p->peek($job));
    expectThrow('stats-job deleted job', ServerException::class, fn () => $p->statsJob($job));
    expectThrow('delete again', JobNotFoundException::class, fn () => $p->delete($job));
}

function phaseBuryRelease(Pheanstalk $p, array $ids): void
{
    step('reserve-with-timeout 0, touch, bury; release with delay');
    $p->useTube('bq-alpha'); // peek-* and kick act on the used tube
    $mid = reserveBody('reserve-with-timeout 0', $p, 0, 'a-mid');
    $p->touch($mid);
    $p->bury($mid, 55);
    checkFields('stats-job buried', $p->statsJob($mid), ['state' => 'buried', 'pri' => 55,
        'buries' => 1, 'reserves' => 1]);
    check('peek-buried bq-alpha', $ids['a_mid'], $p->peekBuried()->getId());
    $low = reserveBody('reserve-with-timeout 0', $p, 0, 'a-low');
    $p->release($low, 101, 1);
    checkFields('stats-job released', $p->statsJob($low), ['state' => 'delayed', 'pri' => 101,
        'delay' => 1, 'releases' => 1]);
    check('peek-delayed bq-alpha', 'a-low', $p->peekDelayed()->getData());
    check('peek-ready bq-alpha (none)', null, $p->peekReady());
    checkFields('stats-tube bq-alpha', $p->statsTube('bq-alpha'), ['current-jobs-ready' => 0,
        'current-jobs-delayed' => 1, 'current-jobs-buried' => 1, 'current-jobs-reserved' => 0,
        'total-jobs' => 3, 'cmd-delete' => 1]);
    step('delayed job becomes ready (reserve-with-timeout 10 waits for it)');
    $low = reserveBody('reserve-with-timeout 10', $p, 10, 'a-low');
    checkFields('stats-job re-reserved', $p->statsJob($low), ['state' => 'reserved',
        'reserves' => 2, 'releases' => 1, 'pri' => 101]);
    $p->delete($low);
}

function phaseKick(Pheanstalk $p, array &$ids): void
{
    step('kick (tube) and kick-job');
    check('kick 5 on bq-alpha', 1, $p->kick(5));
    checkFields('stats-job kicked', $p->statsJob(new JobId($ids['a_mid'])), ['state' => 'ready',
        'kicks' => 1, 'buries' => 1]);
    $p->delete(reserveBody('reserve kicked job', $p, 0, 'a-mid'));
    check('kick with nothing to kick', 0, $p->kick(5));
    $p->kickJob(new JobId($ids['b_delayed']));
    checkFields('stats-job kick-job delayed', $p->statsJob(new JobId($ids['b_delayed'])),
        ['state' => 'ready', 'kicks' => 1]);
    $p->useTube('bq_beta');
    $ids['b_bury'] = put($p, 'b-bury', 0);
    $p->watchOnly('bq_beta');
    $job = reserveBody('reserve bq_beta', $p, 0, 'b-bury');
    $p->bury($job);
    $p->kickJob($job);
    checkFields('stats-job kick-job buried', $p->statsJob($job), ['state' => 'ready',
        'kicks' => 1, 'buries' => 1, 'pri' => 1024]);
    expectThrow('kick-job on a ready job', JobNotFoundException::class, fn () => $p->kickJob($job));
}

function phaseDrainAndTimeouts(Pheanstalk $p): void
{
    step('drain bq_beta in priority order; TIMED_OUT immediately and after 1 s');
    foreach (['b-delayed', 'b-bury', 'b-ready'] as $body) {
        $p->delete(reserveBody('reserve bq_beta', $p, 0, $body));
    }
    check('reserve-with-timeout 0 on empty tube', null, $p->reserveWithTimeout(0));
    $p->watchOnly('bq-empty');
    $start = now();
    check('reserve-with-timeout 1 on empty tube', null, $p->reserveWithTimeout(1));
    checkRange('reserve-with-timeout 1 waited (s)', 0.5, 5.0, round(now() - $start, 2));
    checkFields('stats', $p->stats(), ['current-jobs-ready' => 0, 'current-jobs-reserved' => 0,
        'current-jobs-delayed' => 0, 'current-jobs-buried' => 0, 'total-jobs' => 6,
        'current-tubes' => 3]);
    check('unused empty tubes are gone', ['bq-empty', 'bq_beta', 'default'],
        tubeNames($p->listTubes()));
    checkFields('stats-tube bq_beta', $p->statsTube('bq_beta'), ['total-jobs' => 3,
        'cmd-delete' => 3, 'current-using' => 1, 'current-watching' => 0]);
}

function phaseTtr(Pheanstalk $p, Pheanstalk $p2): void
{
    step('DEADLINE_SOON, TTR expiry, the job goes to a second connection');
    $p->useTube('bq.gamma');
    $id = put($p, 'g-ttr1', 1024, 0, 1);
    $p->watchOnly('bq.gamma');
    $job = reserveBody('reserve ttr 1', $p, 0, 'g-ttr1');
    expectThrow('reserve while holding a job about to expire', DeadlineSoonException::class,
        fn () => $p->reserve());
    expectThrow('reserve-with-timeout 0 while holding it', DeadlineSoonException::class,
        fn () => $p->reserveWithTimeout(0));
    // The owner watches its job until the expiry is counted. Debian's beanstalkd 1.12
    // sometimes does not expire the job of an owner that stays silent (see README).
    $expired = waitUntil('stats-job timeouts reaches 1', 5, function () use ($p, $job) {
        $n = (int) $p->statsJob($job)['timeouts'];
        return $n >= 1 ? $n : null;
    });
    check('TTR expiry counted', 1, $expired);
    $p2->watchOnly('bq.gamma');
    $other = reserveBody('second connection gets the job', $p2, 10, 'g-ttr1');
    check('same job id', $id, $other->getId());
    checkFields('stats-job timed-out', $p2->statsJob($other), ['state' => 'reserved',
        'reserves' => 2, 'timeouts' => 1]);
    checkFields('stats', $p->stats(), ['job-timeouts' => 1]);
    expectThrow('first connection deletes a job it lost', JobNotFoundException::class,
        fn () => $p->delete($job));
    $p2->delete($other);
}

function phaseTouch(Pheanstalk $p): void
{
    step('touch extends the TTR');
    put($p, 't-touch', 1024, 0, 3);
    $job = reserveBody('reserve ttr 3', $p, 0, 't-touch');
    $left = waitUntil('time-left drops to <= 1', 5, function () use ($p, $job) {
        $left = (int) $p->statsJob($job)['time-left'];
        return $left <= 1 ? $left : null;
    });
    checkRange('time-left before touch', 0, 1, $left);
    $p->touch($job);
    checkFields('stats-job touched', $p->statsJob($job), ['state' => 'reserved',
        'time-left' => [2, 3], 'timeouts' => 0]);
    $p->delete($job);
}

function phasePause(Pheanstalk $p): void
{
    step('pause-tube and resume (pause-tube 0)');
    $p->useTube('bq-paused');
    put($p, 'p-1');
    $start = now();
    $p->pauseTube('bq-paused', 2);
    checkFields('stats-tube bq-paused', $p->statsTube('bq-paused'), ['pause' => 2,
        'pause-time-left' => [0, 2], 'cmd-pause-tube' => 1, 'current-jobs-ready' => 1]);
    $p->watchOnly('bq-paused');
    check('reserve-with-timeout 0 on paused tube', null, $p->reserveWithTimeout(0));
    $job = reserveBody('reserve-with-timeout 10 returns after the pause', $p, 10, 'p-1');
    checkRange('pause held the job for (s)', 1.5, 10.0, round(now() - $start, 2));
    checkFields('stats-tube bq-paused', $p->statsTube('bq-paused'), ['pause' => 0,
        'pause-time-left' => 0]);
    $p->delete($job);
    put($p, 'p-2');
    $p->pauseTube('bq-paused', 3600);
    check('reserve-with-timeout 0 on paused tube', null, $p->reserveWithTimeout(0));
    $start = now();
    $p->resumeTube('bq-paused');
    $job = reserveBody('reserve-with-timeout 10 after resume', $p, 10, 'p-2');
    checkRange('resume released the tube within (s)', 0.0, 2.0, round(now() - $start, 2));
    $p->delete($job);
    expectThrow('pause-tube unknown tube', ServerException::class,
        fn () => $p->pauseTube('bq-nope', 1));
    expectThrow('stats-tube unknown tube', ServerException::class,
        fn () => $p->statsTube('bq-nope'));
}

function phaseWatchUse(Pheanstalk $p): void
{
    step('watch / ignore / use and their listings');
    $p->watch('bq-w1')->watch('bq-w2');
    check('list-tubes-watched', ['bq-paused', 'bq-w1', 'bq-w2'],
        tubeNames($p->listTubesWatched(true)));
    $p->ignore('bq-paused')->ignore('bq-w1');
    check('list-tubes-watched after ignore', ['bq-w2'], $p->listTubesWatched(true));
    expectThrow('ignore the last watched tube', ServerException::class,
        fn () => $p->ignore('bq-w2'));
    $p->useTube('bq-u');
    check('list-tube-used', 'bq-u', $p->listTubeUsed(true));
    expectThrow('use an invalid name', ServerBadFormatException::class,
        fn () => $p->useTube('-bad'));
    check('list-tube-used unchanged', 'bq-u', $p->listTubeUsed(true));
    check('list-tubes', ['bq-u', 'bq-w2', 'bq.gamma', 'default'], tubeNames($p->listTubes()));
}

function phaseBinary(Pheanstalk $p): void
{
    step('binary bodies: all 256 byte values, empty, 65535 bytes; 65536 is JOB_TOO_BIG');
    mt_srand(7);
    $big = '';
    for ($i = 0; $i < 65535; $i++) {
        $big .= chr(mt_rand(0, 255));
    }
    $p->useTube('bq-binary');
    $p->watchOnly('bq-binary');
    foreach ([implode('', array_map('chr', range(0, 255))), '', $big] as $body) {
        $id = put($p, $body);
        check('peek ' . show($body), $body, $p->peek(new JobId($id))->getData());
        $job = reserveBody('reserve ' . show($body), $p, 0, $body);
        checkFields('stats-job binary', $p->statsJob($job), ['state' => 'reserved',
            'tube' => 'bq-binary']);
        $p->delete($job);
    }
    expectThrow('put 65536 bytes', JobTooBigException::class,
        fn () => $p->put(str_repeat('x', 65536)));
    checkFields('stats-tube bq-binary', $p->statsTube('bq-binary'), ['total-jobs' => 3,
        'current-jobs-ready' => 0]);
    check('connection usable after JOB_TOO_BIG', 'bq-binary', $p->listTubeUsed(true));
}

function produce(int $port): int
{
    try {
        $p = Pheanstalk::create('127.0.0.1', $port);
        $p->useTube('bq-pc');
        for ($i = 0; $i < PC_JOBS; $i++) {
            $p->put("pc-$i", $i % 7, 0, 60);
        }
        return 0;
    } catch (Throwable $e) {
        fwrite(STDERR, 'producer: ' . get_class($e) . ': ' . $e->getMessage() . "\n");
        return 3;
    }
}

function consume(int $port): array
{
    $c = Pheanstalk::create('127.0.0.1', $port);
    $c->watchOnly('bq-pc');
    $bodies = [];
    for ($i = 0; $i < PC_JOBS; $i++) {
        $job = $c->reserveWithTimeout(10);
        if ($job === null) {
            throw new CheckFailed('consumer: TIMED_OUT after ' . count($bodies) . ' jobs');
        }
        $bodies[] = $job->getData();
        $c->delete($job);
    }
    return $bodies;
}

function phaseProducerConsumer(Pheanstalk $p, int $port): void
{
    step('producer (forked process) and consumer on two connections, ' . PC_JOBS . ' jobs');
    $p->watch('bq-pc'); // keeps the tube (and its counters) alive after both clients close
    $child = pcntl_fork();
    if ($child === 0) {
        $GLOBALS['owner_pid'] = 0;
        exit(produce($port));
    }
    $bodies = consume($port);
    pcntl_waitpid($child, $status);
    check('producer exit status', 0, pcntl_wifexited($status) ? pcntl_wexitstatus($status) : -1);
    $GLOBALS['puts'] += PC_JOBS;
    check('consumer got', PC_JOBS, count($bodies));
    check('no duplicates', PC_JOBS, count(array_unique($bodies)));
    $want = array_map(fn ($i) => "pc-$i", range(0, PC_JOBS - 1));
    sort($want, SORT_STRING);
    sort($bodies, SORT_STRING);
    check('no loss', $want, $bodies);
    checkFields('stats-tube bq-pc', $p->statsTube('bq-pc'), ['total-jobs' => PC_JOBS,
        'cmd-delete' => PC_JOBS, 'current-jobs-ready' => 0, 'current-jobs-reserved' => 0]);
    $p->watchOnly('bq-pc');
    check('tube empty afterwards', null, $p->reserveWithTimeout(0));
}

function phaseFinal(Pheanstalk $p, int $pid): void
{
    step('final server stats');
    waitUntil('current-connections back to 2', 5,
        fn () => $p->stats()['current-connections'] === '2');
    checkFields('stats', $p->stats(), ['current-jobs-ready' => 0, 'current-jobs-reserved' => 0,
        'current-jobs-delayed' => 0, 'current-jobs-buried' => 0, 'total-jobs' => $GLOBALS['puts'],
        'current-connections' => 2, 'job-timeouts' => 1, 'pid' => $pid]);
    check('server still running', false, serverExited($pid));
}

function run(string $binary): void
{
    $port = freePort();
    $pid = startServer($binary, $port);
    waitForAccept($pid, $port);
    $p = Pheanstalk::create('127.0.0.1', $port);
    $p2 = Pheanstalk::create('127.0.0.1', $port);
    $ids = [];
    phaseInitial($p, $p2, $pid);
    phasePut($p, $ids);
    phasePeek($p, $ids);
    phaseReserveDelete($p, $ids);
    phaseBuryRelease($p, $ids);
    phaseKick($p, $ids);
    phaseDrainAndTimeouts($p);
    phaseTtr($p, $p2);
    phaseTouch($p);
    phasePause($p);
    phaseWatchUse($p);
    phaseBinary($p);
    phaseProducerConsumer($p, $port);
    phaseFinal($p, $pid);
}

function main(array $argv): int
{
    if (count($argv) !== 2) {
        fwrite(STDERR, "usage: php $argv[0] SERVER_BINARY\n");
        return 2;
    }
    register_shutdown_function('stopServer');
    pcntl_async_signals(true);
    pcntl_signal(SIGALRM, function () {
        fwrite(STDERR, "FAIL [{$GLOBALS['step']}]: run exceeded " . WATCHDOG_SECONDS .
            " s (server hang?)\n");
        stopServer();
        exit(1);
    }, false);
    pcntl_alarm(WATCHDOG_SECONDS);
    try {
        run($argv[1]);
    } catch (Throwable $e) {
        fwrite(STDERR, "FAIL [{$GLOBALS['step']}]: " . get_class($e) . ': ' . $e->getMessage() .
            "\n");
        if (!($e instanceof CheckFailed)) {
            fwrite(STDERR, '    at ' . $e->getFile() . ':' . $e->getLine() . "\n");
        }
        stopServer();
        return 1;
    }
    stopServer();
    echo "PASS: pheanstalk, {$GLOBALS['checks']} checks against {$argv[1]}\n";
    return 0;
}

exit(main($argv));
