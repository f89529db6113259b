<?php
/*
 * Client-visible failover with Debian's unmodified Pheanstalk 4
 * (php-pda-pheanstalk): a three-node cluster (--failover=auto, TLS, -f 0) on
 * loopback, one Pheanstalk connection to a standby (proxied to the primary)
 * that uses and watches its own tube and runs put / reserve / delete one
 * command at a time, through a switchover and then a kill -9 of the
 * primary. Checked: the tube it uses and the tubes it watches are the same
 * on the new primary, nothing it put is lost (every acknowledged job is
 * deleted by it or still there), per role change at most one failed
 * command and two reconnects (the proxy keeps the connection unless a
 * change was in flight; Pheanstalk reconnects by itself, and a reconnect
 * during the switchover's pause may meet it again), and no write refused
 * (DRAINING, OUT_OF_MEMORY): through a switchover writes wait. Prints the
 * figures.
 *
 *   BQ_CTL=build/beanstalkctl BQ_MKCERTS=deploy/mkcerts \
 *     php tests/clients/pheanstalk_failover.php build/beanstalkd-ha
 */

declare(strict_types=1);

require '/usr/share/php/Pheanstalk/autoload.php';

use Pheanstalk\Connection;
use Pheanstalk\Pheanstalk;
use Pheanstalk\SocketFactory;

const TUBE = 'php-fo';
const CYCLES = 150;            // completed cycles before and after each role change
const WATCHDOG_SECONDS = 240;

/* Counts Pheanstalk's own reconnects (it disconnects, then reconnects). */
final class CountingConnection extends Connection
{
    public static int $disconnects = 0;

    public function disconnect()
    {
        self::$disconnects++;
        parent::disconnect();
    }
}

$step = 'startup';
$pids = [];
$work = '';

function fail(string $what): void
{
    global $step;
    fwrite(STDERR, "FAIL [$step]: $what\n");
    cleanup(false);
    exit(1);
}

function cleanup(bool $remove): void
{
    global $pids, $work;
    foreach ($pids as $pid) {
        @posix_kill($pid, SIGKILL);
        pcntl_waitpid($pid, $status);
    }
    $pids = [];
    if ($remove && $work !== '') {
        exec('rm -rf ' . escapeshellarg($work));
    }
}

function free_port(): int
{
    $s = stream_socket_server('tcp://127.0.0.1:0');
    $name = stream_socket_get_name($s, false);
    fclose($s);
    return (int)substr($name, strrpos($name, ':') + 1);
}

function now(): float
{
    return hrtime(true) / 1e9;
}

/* Runs $poll until it returns a true value, calling $tick meanwhile. */
function wait_until(string $what, float $seconds, callable $poll, ?callable $tick = null)
{
    $deadline = now() + $seconds;
    while (!($v = $poll())) {
        if (now() > $deadline) {
            fail("$what within $seconds s");
        }
        if ($tick) {
            $tick();
        } else {
            usleep(50000);
        }
    }
    return $v;
}

function status(array $n): ?array
{
    $ctx = stream_context_create(['http' => ['timeout' => 1]]);
    $body = @file_get_contents("http://127.0.0.1:{$n['admin']}/status", false, $ctx);
    return $body === false ? null : json_decode($body, true);
}

/* The primary with both standbys streaming, or null. */
function settled(array $nodes): ?array
{
    foreach ($nodes as $n) {
        $st = status($n);
        if (!$st || $st['role'] !== 'primary') {
            continue;
        }
        $streaming = count(array_filter($st['standbys'], fn($s) => $s['state'] === 'streaming'));
        if ($streaming === 2) {
            return $n;
        }
    }
    return null;
}

[$server, $ctl, $mkcerts] = [$argv[1] ?? null, getenv('BQ_CTL'), getenv('BQ_MKCERTS')];
if (!$server || !$ctl || !$mkcerts) {
    fail('usage: BQ_CTL=... BQ_MKCERTS=... pheanstalk_failover.php SERVER');
}
pcntl_async_signals(true);
pcntl_signal(SIGALRM, function () {
    fail('the whole run took more than ' . WATCHDOG_SECONDS . ' s');
});
pcntl_alarm(WATCHDOG_SECONDS);
$work = trim(shell_exec('mktemp -d /tmp/bq-php-fo.XXXXXX'));
$certs = "$work/certs";
exec(implode(' ', array_map('escapeshellarg', [$mkcerts, $certs, 'n1', 'n2', 'n3', 'beanstalkctl']))
     . ' >/dev/null 2>&1', $out, $rc);
if ($rc !== 0) {
    fail('deploy/mkcerts failed');
}
$nodes = [];
foreach ([1, 2, 3] as $i) {
    $nodes[] = ['name' => "n$i", 'client' => free_port(), 'repl' => free_port(), 'admin' => free_port()];
}
$peers = [];
foreach ($nodes as $n) {
    array_push($peers, '--peer', "{$n['name']}=127.0.0.1:{$n['repl']}");
}
foreach ($nodes as $n) {
    @mkdir("$work/{$n['name']}");
    $pid = pcntl_fork();
    if ($pid === 0) {
        fclose(STDERR); /* the lowest free descriptor, 2, becomes the log */
        $err = fopen("$work/{$n['name']}.log", 'a');
        $args = array_merge(['-l', '127.0.0.1', '-p', (string)$n['client'], '-b', "$work/{$n['name']}",
            '-f', '0', '--node-id', $n['name']], $peers, ['--role=standby', '--failover=auto',
            '--admin-listen', "127.0.0.1:{$n['admin']}", '--status-interval', '0',
            '--tls-cert', "$certs/{$n['name']}.pem", '--tls-key', "$certs/{$n['name']}.key",
            '--tls-ca', "$certs/ca.pem"]);
        pcntl_exec($server, $args);
        exit(127);
    }
    $pids[$n['name']] = $pid;
}
$primary = wait_until('a primary with both standbys streaming', 30, fn() => settled($nodes));
$others = array_values(array_filter($nodes, fn($n) => $n !== $primary));
[$standby, $third] = $others;
echo "primary {$primary['name']}; the client connects to the standby {$standby['name']}\n";

$step = 'session';
$conn = new CountingConnection(new SocketFactory('127.0.0.1', $standby['client'], 10));
$p = new Pheanstalk($conn);
$p->useTube(TUBE);
$p->watch(TUBE);
$p->ignore('default');

function check_session(Pheanstalk $p): void
{
    $used = $p->listTubeUsed();
    $watched = $p->listTubesWatched();
    if ($used !== TUBE) {
        fail("the tube used is $used, want " . TUBE);
    }
    if ($watched !== [TUBE]) {
        fail('the tubes watched are ' . json_encode($watched) . ', want ["' . TUBE . '"]');
    }
    echo "  ok  session: using $used, watching " . json_encode($watched) . "\n";
}
check_session($p);

$acked = [];
$deleted = [];
$failed = [];
$times = [];
$n = 0;
/* One put / reserve / delete cycle. */
$refused = [];
$cycle = function () use ($p, &$acked, &$deleted, &$failed, &$refused, &$times, &$n) {
    $n++;
    $deleting = 0;
    try {
        $job = $p->put("job-$n");
        $acked[$job->getId()] = true;
        $got = $p->reserveWithTimeout(5);
        if ($got === null) {
            $failed[] = 'reserve timed out';
            return;
        }
        $deleting = $got->getId();
        $p->delete($got);
        $deleted[$got->getId()] = true;
        $times[] = now();
    } catch (\Pheanstalk\Exception\JobNotFoundException $e) {
        /* Pheanstalk sends a command again after reconnecting: a delete
         * done before the connection broke then finds nothing. */
        $deleted[$deleting] = true;
        $failed[] = get_class($e) . ': ' . $e->getMessage();
    } catch (\Pheanstalk\Exception\ServerDrainingException | \Pheanstalk\Exception\ServerOutOfMemoryException $e) {
        $refused[] = get_class($e) . ': ' . $e->getMessage();
    } catch (Throwable $e) {
        $failed[] = get_class($e) . ': ' . $e->getMessage();
    }
};
$run = function (int $more) use ($cycle, &$times) {
    $target = count($times) + $more;
    $deadline = now() + 60;
    while (count($times) < $target) {
        if (now() > $deadline) {
            fail("$more more cycles");
        }
        $cycle();
    }
};
$results = [];
$role_change = function (string $what, callable $start, callable $done) use (&$results, $run, $cycle, &$times, &$failed, &$refused) {
    global $step;
    $step = $what;
    $run(CYCLES);
    $from = count($times);
    $reconnects = CountingConnection::$disconnects;
    $nfailed = count($failed);
    $nrefused = count($refused);
    $start();
    $new = wait_until("a new primary after the $what", 30, $done, $cycle);
    $run(CYCLES);
    $t = array_slice($times, max($from - 1, 0));
    $gap = 0.0;
    for ($i = 1; $i < count($t); $i++) {
        $gap = max($gap, $t[$i] - $t[$i - 1]);
    }
    $r = ['what' => $what, 'primary' => $new['name'],
          'reconnects' => CountingConnection::$disconnects - $reconnects,
          'failed' => count($failed) - $nfailed, 'refused' => count($refused) - $nrefused,
          'gap_ms' => (int)round($gap * 1000)];
    $results[] = $r;
    echo "$what: new primary {$r['primary']}, reconnects {$r['reconnects']}, failed commands "
        . "{$r['failed']}, refused while writes paused {$r['refused']}, longest gap between "
        . "completed cycles {$r['gap_ms']} ms\n";
};

$ctlproc = null;
$role_change('switchover', function () use ($ctl, $primary, $third, $certs, &$ctlproc) {
    $cmd = array_map('escapeshellarg', [$ctl, '--nodes', "{$primary['name']}=127.0.0.1:{$primary['admin']}",
        '--tls-cert', "$certs/beanstalkctl.pem", '--tls-key', "$certs/beanstalkctl.key",
        '--tls-ca', "$certs/ca.pem", 'switchover', '--to', $third['name']]);
    $ctlproc = proc_open(implode(' ', $cmd) . ' >/dev/null 2>&1', [], $pipes);
}, function () use ($nodes, $third) {
    $s = settled($nodes);
    return $s && $s['name'] === $third['name'] ? $s : null;
});
if (proc_close($ctlproc) !== 0) {
    fail('beanstalkctl switchover failed');
}
check_session($p);

$role_change('kill -9 of the primary', function () use (&$pids, $third) {
    posix_kill($pids[$third['name']], SIGKILL);
    pcntl_waitpid($pids[$third['name']], $status);
    unset($pids[$third['name']]);
}, function () use ($nodes, $third) {
    foreach ($nodes as $n) {
        if ($n['name'] !== $third['name'] && ($st = status($n)) && $st['role'] === 'primary') {
            return $n;
        }
    }
    return null;
});
check_session($p);

$step = 'history';
$lost = [];
foreach (array_keys($acked) as $id) {
    if (!isset($deleted[$id])) {
        try {
            $p->peek(new \Pheanstalk\JobId($id));
        } catch (Throwable $e) {
            $lost[] = "$id (" . get_class($e) . ': ' . $e->getMessage() . ')';
        }
    }
}
if ($lost) {
    fail('acknowledged jobs lost: ' . implode(',', array_slice($lost, 0, 10)));
}
echo '  ok  ' . count($acked) . ' puts acknowledged, ' . count($deleted) . " deleted, none lost\n";
foreach ($failed as $f) {
    echo "  failed command: $f\n";
}
if (count($refused) > 0) {
    fail(count($refused) . ' writes refused (DRAINING or OUT_OF_MEMORY); writes wait through a switchover: '
        . $refused[0]);
}
foreach ($results as $r) {
    if ($r['reconnects'] > 2) {
        fail("{$r['what']}: {$r['reconnects']} reconnects, want at most 2");
    }
    if ($r['failed'] > 1) {
        fail("{$r['what']}: {$r['failed']} failed commands, want at most 1");
    }
}
echo 'RESULT reconnects=' . CountingConnection::$disconnects . ' failed=' . count($failed)
    . ' refused=' . count($refused) . ' '
    . implode(' ', array_map(fn($r) => explode(' ', $r['what'])[0] . "_gap_ms={$r['gap_ms']}", $results))
    . "\n";
cleanup(true);
exit(0);
