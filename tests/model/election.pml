/* Promela model of automatic failover: Raft's elections and log replication
 * as replication/election.h (implemented in replication/election.c) and
 * replication/commit.h (commit.c) state them, with epoch = term, log entry =
 * binlog frame (only its epoch matters), index = LSN, primary = leader.
 * Checked exhaustively by tests/model/check. By hand:
 *   spin -a election.pml && gcc -O2 -DSAFETY -o pan pan.c && ./pan -m200000
 *   spin -t election.pml        (replays a counterexample)
 *
 * Model element          Code
 * nd[n].epoch, .voted    bq_election_t.epoch, .voted_for, stored durably
 *                        (node/cluster/election_store.c) before any reply leaves
 * nd[n].log[], .ln       the binlog, one epoch per frame; durable
 * nd[n].role             bq_el_role_t (no PRECANDIDATE: see below); volatile
 * nd[n].granted          bq_election_t.granted; volatile
 * stand                  election.c: bq_el_tick past the deadline, or
 *                        bq_el_campaign: epoch + 1, vote for itself, request
 * vote                   election.c: bq_el_on_request grants one vote per
 *                        epoch, only to a candidate whose (last epoch, last
 *                        LSN) is at least the voter's (bq_el_pos_cmp);
 *                        bq_el_on_reply counts it
 * win                    election.c: bq_el_on_reply, a majority: BQ_EL_LEAD
 * write                  the primary logs a record of its epoch
 * send, recv             feeder.c / sender.c stream frames; receiver.c with
 *                        bq_el_on_primary refuses a lower epoch and adopts a
 *                        higher one; the check of the previous frame and the
 *                        cut of a diverged tail are handshake.c (RESUME only
 *                        when the primary holds the standby's last frame with
 *                        its epoch, else RESYNC: the log is replaced by the
 *                        primary's), i.e. rejoin: cut at the fork point
 * acknowledge            commit.c: bq_commit_ack then bq_commit_update with
 *                        --sync-standbys 1 of 2 standbys. The reply for a
 *                        record of the primary's epoch is released once a
 *                        standby that accepted that epoch reported it
 *                        flushed: primary + 1 standby = a majority of 3
 * learn                  election.c: a higher epoch seen in any message
 *                        makes a node a follower of it with no vote given
 * crash                  kill -9 and restart: role and votes lost; epoch,
 *                        vote and log kept
 * With -DWITNESS, node W = 2 is a --role=witness (can_lead false): a voter
 * with no log, which gets no frames and never stands; 0 and 1 are the data
 * nodes, each the other's only standby:
 * nd[W].floor_e, .floor_k
 *                        the witness's floor (epoch, LSN): election_store.h
 *                        floor_epoch, floor_lsn; durable
 * send_floor             feeder.c: a heartbeat to the witness naming
 *                        floor_lsn = bq_commit_floor_lsn (the commit point
 *                        while sync is in force, the primary's durable LSN
 *                        while degraded: ask_floors), of the primary's epoch
 * take_floor             receiver.c on_heartbeat, failover.c
 *                        bq_failover_heard: bq_el_on_primary refuses a
 *                        heartbeat of a lower epoch (no floor, no ack) and
 *                        adopts a higher one; keep_floor stores a higher
 *                        floor durably; then the ack names the floor kept
 *                        for the heartbeat's epoch (kept_floor), which
 *                        feeder.c on_ack counts (bq_commit_floor) when that
 *                        epoch is the primary's
 * vote by the witness    would_vote: the candidate's position at least the
 *                        floor (and at least the witness's empty log)
 * acknowledge            commit.c with self_counts: the sync rule (the
 *                        primary's durable log and the standby's flushed
 *                        entries: need + 1 = 2 copies) or, degraded, the
 *                        majority rule (2 of: the primary's durable log, the
 *                        standby's flushed entries, the witness's floor)
 *
 * Faults, in any interleaving: any node crashes and restarts between any
 * two steps; a message may never arrive (loss, partition) or arrive
 * arbitrarily late; a paused primary is a process that is not scheduled,
 * and what it sent before, or sends when it wakes, carries its old epoch.
 * Frames: each directed link holds one message in flight, a newer one
 * replacing it (the older is lost).
 *
 * Over-approximations (each only adds behaviours, so what holds here holds
 * for the rules in the code):
 * - any node that is not primary may stand at any time: this covers the
 *   timeouts, PreVote and the data nodes' floors (bq_el_raise_floor from
 *   heartbeats, in memory), which only withhold an election or a vote;
 * - a primary may send any entry of its log (covers the fork-point search
 *   and resync); heartbeats to a data node are left out: one that is taken
 *   changes nothing that the frame of the entry it names would not, and
 *   acknowledges as far (its floor only withholds votes);
 * - any node may learn a higher epoch of any other node at any time (covers
 *   every refusal that names a higher epoch). A request of a candidate that
 *   no longer stands, and frames of an epoch below the receiver's, reach
 *   nothing that learning the epoch does not (a vote given to such a request
 *   only withholds later votes), so they are dropped;
 * - a candidate's request reaches a voter any time while it stands; a vote
 *   reaches the candidate at once, which may act on it later or never;
 * - a standby's ack reaches the primary at once, and the primary
 *   acknowledges every entry it may as soon as it may. Releasing a reply
 *   later, or never, checks nothing more: the primary's log up to the entry
 *   does not change while it is primary, and P3 checks the primaries of
 *   later epochs when they win. CheckQuorum fencing (bq_el_may_ack) only
 *   withholds acknowledgements.
 * With -DWITNESS:
 * - the primary acknowledges by the sync rule or by the majority rule
 *   whenever that rule's condition holds, whether sync is in force or not;
 * - a primary may send the witness, at any time, the floor (its epoch, k)
 *   for any k up to its durable log whose entry is of its epoch: this covers
 *   the commit point and the durable LSN, and earlier floors that arrive
 *   late or after later ones. Floors whose entry is of an earlier epoch (a
 *   new primary's commit point before it logged anything) are not sent:
 *   nothing of the primary's epoch lies at or below them, so they count for
 *   no reply and only withhold votes;
 * - the witness's ack reaches the primary at once, as a standby's does, and
 *   names the floor the witness keeps durably for the primary's epoch at
 *   that moment; the primary acknowledges what it may by it at once. An ack
 *   that arrives later, again (the periodic ack, the one after a new
 *   Welcome) or never releases nothing more: a floor only rises, and the
 *   witness stored it while in the primary's epoch, so it refuses every
 *   candidate below it in that epoch and every later one; the primary is
 *   primary from its send to the ack (a restarted primary is a standby);
 * - without LAZY_FSYNC the primary holds its log durably as it writes it,
 *   and a floor the witness keeps is one it sent, so the majority rule is
 *   the primary and one other; with SELF_FLUSHED the primary's durable log
 *   is fl, the floor it learned is match[W], and commit() applies both
 *   rules, the standby and the witness without the primary included;
 * - the witness's own log position (nothing) and its in-memory floor, which
 *   is above the durable one while keep_floor's save fails, only withhold
 *   votes and are left out; its crash then changes nothing modelled.
 * Not modelled: bq_el_assume (a primary without votes: --force, unsafe by
 * design), the async modes (--sync-standbys 0, fallback async without
 * automatic failover), which may lose acknowledged writes, as
 * docs/replication.md says, and a cluster with more than one witness or more
 * than three voters.
 *
 * Bounds: 3 voters, epochs 1..MAXE, logs of at most MAXL entries (check runs
 * MAXE 3 with MAXL 3, and MAXE 4 with MAXL 2; with WITNESS MAXE 4 with MAXL
 * 3, which includes both). By symmetry node 0 stands first: nothing else can
 * happen before a node stands.
 *
 * Properties (assertions):
 *  P1 election safety: at most one node ever becomes primary of an epoch
 *     (ghost won); a primary never gets frames of its own epoch.
 *  P2 acknowledged entries form one chain: the primary that acknowledges
 *     entry k is primary of its epoch, its log up to k agrees with every
 *     earlier acknowledgement (ghost chain[]: the acknowledged log), and
 *     every node that is primary of a higher epoch at that moment holds the
 *     same log up to k.
 *  P3 no lost acknowledged write: a node that becomes primary of epoch e
 *     holds every entry acknowledged in an epoch below e (ghost ackin[]).
 *     A candidate of a lower epoch may still win after a later epoch
 *     acknowledged entries it lacks (its votes were given before): it can
 *     acknowledge nothing, which P2 checks.
 *  LM log matching: a standby's log up to the entry it acknowledges is the
 *     primary's; a floor the witness keeps for the primary's epoch names an
 *     entry of that epoch in the primary's log.
 *
 * Variants (-D to spin), each expected to fail an assertion:
 *  BROKEN_VOTE   votes without the log comparison (P3)
 *  BROKEN_TWICE  votes a second time in an epoch (P1)
 *  BROKEN_STALE  standbys take frames of a lower epoch (P2)
 *  BROKEN_COMMIT a primary also acknowledges entries of earlier epochs once
 *                a majority holds them (Raft's figure 8; needs MAXE 4)
 *  LAZY_FSYNC    the primary's own frames are durable only after a later
 *                fsync (-f MS) and a crash loses the rest, while the
 *                primary counts itself as holding them (P3). With
 *                SELF_FLUSHED as well it counts itself only up to what it
 *                fsynced, and the properties hold.
 *  WITNESS       node 2 is a witness (see above); the properties hold, also
 *                with LAZY_FSYNC and SELF_FLUSHED. With it, each fails:
 *  BROKEN_FLOOR  the witness votes without comparing with its floor (P3)
 *  BROKEN_EARLY_FLOOR the primary counts the floor it asks the witness to
 *                keep before the witness stored it (P2 or P3)
 *  BROKEN_STALE_FLOOR the witness keeps and acknowledges a floor of an
 *                epoch below its own (P2)
 */

#define N 3
#ifndef MAXE
#define MAXE 3
#endif
#ifndef MAXL
#define MAXL 3
#endif
#define NOBODY N
#define MAJORITY 2

#ifdef WITNESS
#define W 2 /* the witness; 0 and 1 are the data nodes, 1 - i the other of i */
#endif

#define FOLLOWER 0
#define CANDIDATE 1
#define PRIMARY 2

typedef node_t {
    byte epoch;     /* durable */
    byte voted;     /* durable: NOBODY or the node voted for in epoch */
    byte ln;        /* durable: entries in log */
    byte log[MAXL]; /* durable: log[k - 1] = epoch of entry k; 0 past ln */
#ifdef LAZY_FSYNC
    byte fl;        /* durable: entries fsynced; the rest is in the page cache */
#endif
#ifdef SELF_FLUSHED
    byte match[N];  /* volatile, primary: entries each standby flushed (the
                       witness: the floor it acknowledged in this epoch) */
#endif
#ifdef WITNESS
    byte floor_e;   /* durable, the witness: the floor (epoch, LSN) it never */
    byte floor_k;   /* votes below; 0 for the data nodes (left out) */
#endif
    byte role;      /* volatile */
    byte granted;   /* volatile: voters (bit per node) that granted, candidate */
};

/* Frames in flight: e = 0 for none; the entry after index pk (of epoch pe)
 * with epoch ee. To the witness: the floor (e, pk) of the primary of e. */
typedef app_t {
    byte e;
    byte pk;
    byte pe;
    byte ee;
};

node_t nd[N];
app_t ap[N * (N - 1)];

byte won;         /* ghost: epochs (bit per epoch) in which a node became primary */
byte chain[MAXL]; /* ghost: the acknowledged log (entry epochs, 0 = none yet) */
byte ackin[MAXL]; /* ghost: the lowest epoch in which each entry of chain was
                     acknowledged (itself or an entry after it) */

/* Scratch variables of the steps, not part of the state. */
hidden byte m_e, m_pk, m_pe, m_ee, m_k, m_t, m_j;

/* The slot of the directed link f -> to, and the receiver of slot s. */
#define L(f, to) ((f) * (N - 1) + ((to) < (f) -> (to) : (to) - 1))
#define TO(s) ((s) % (N - 1) < (s) / (N - 1) -> (s) % (N - 1) : (s) % (N - 1) + 1)
#define LASTE(n) (nd[n].ln == 0 -> 0 : nd[n].log[nd[n].ln - 1])
#define VOTES(g) (((g) & 1) + (((g) >> 1) & 1) + (((g) >> 2) & 1))

inline clear_volatile(n) {
#ifdef SELF_FLUSHED
    nd[n].match[0] = 0;
    nd[n].match[1] = 0;
    nd[n].match[2] = 0;
#endif
    nd[n].role = FOLLOWER;
    nd[n].granted = 0
}

/* n sees epoch ep above its own: a follower of ep, with no vote given. */
inline adopt(n, ep) {
    nd[n].epoch = ep;
    nd[n].voted = NOBODY;
    clear_volatile(n)
}

/* Drops frames that their receiver would refuse (epoch below its own): they
 * reach nothing more (see the over-approximations), and one state is fewer. */
inline reap() {
#ifndef BROKEN_STALE
    m_t = 0;
    do
    :: m_t < N * (N - 1) ->
        if
#ifdef BROKEN_STALE_FLOOR
        :: ap[m_t].e != 0 && ap[m_t].e < nd[TO(m_t)].epoch && TO(m_t) != W ->
#else
        :: ap[m_t].e != 0 && ap[m_t].e < nd[TO(m_t)].epoch ->
#endif
            ap[m_t].e = 0;
            ap[m_t].pk = 0;
            ap[m_t].pe = 0;
            ap[m_t].ee = 0
        :: else -> skip
        fi;
        m_t++
    :: else -> break
    od;
#endif
    skip
}

#ifdef LAZY_FSYNC
#define DURABLE(n) nd[n].fl
#else
#define DURABLE(n) nd[n].ln
#endif

/* Entries past ln are zero, so that equal logs are equal states. */
inline trim(n) {
    m_t = nd[n].ln;
    do
    :: m_t < MAXL -> nd[n].log[m_t] = 0; m_t++
    :: else -> break
    od
}

inline stand(i) {
    nd[i].role != PRIMARY && nd[i].epoch < MAXE;
    nd[i].epoch++;
    nd[i].voted = i;
    nd[i].role = CANDIDATE;
    nd[i].granted = 1 << i;
    printf("n%d stands in epoch %d\n", i, nd[i].epoch);
    reap()
}

/* Voter i takes the vote request of candidate c. */
inline vote(i, c) {
    nd[c].role == CANDIDATE && nd[c].epoch >= nd[i].epoch &&
        (nd[c].granted & (1 << i)) == 0;
    printf("n%d gets the vote request of n%d for epoch %d\n", i, c, nd[c].epoch);
    if
    :: nd[c].epoch > nd[i].epoch -> m_e = nd[c].epoch; adopt(i, m_e)
    :: else -> skip
    fi;
    if
#ifdef BROKEN_TWICE
    :: nd[i].voted != i &&
#else
    :: (nd[i].voted == NOBODY || nd[i].voted == c) &&
#endif
#if defined(WITNESS) && !defined(BROKEN_FLOOR)
        (LASTE(c) > nd[i].floor_e ||
         (LASTE(c) == nd[i].floor_e && nd[c].ln >= nd[i].floor_k)) &&
#endif
#ifdef BROKEN_VOTE
        true ->
#else
        (LASTE(c) > LASTE(i) || (LASTE(c) == LASTE(i) && nd[c].ln >= nd[i].ln)) ->
#endif
        nd[i].voted = c;
        nd[c].granted = nd[c].granted | (1 << i);
        printf("n%d votes for n%d in epoch %d\n", i, c, nd[c].epoch)
    :: else -> skip
    fi;
    reap()
}

/* P3: node n holds every entry acknowledged in an epoch below its own. */
inline holds_chain(n) {
    m_t = 0;
    do
    :: m_t < MAXL && chain[m_t] != 0 ->
        assert(ackin[m_t] >= nd[n].epoch ||
               (nd[n].ln > m_t && nd[n].log[m_t] == chain[m_t])); /* P3 */
        m_t++
    :: else -> break
    od
}

inline win(i) {
    nd[i].role == CANDIDATE && VOTES(nd[i].granted) >= MAJORITY;
    printf("n%d is primary of epoch %d\n", i, nd[i].epoch);
    assert((won & (1 << nd[i].epoch)) == 0); /* P1 */
    won = won | (1 << nd[i].epoch);
    holds_chain(i);
    nd[i].role = PRIMARY;
    nd[i].granted = 0
}

inline write(i) {
    nd[i].role == PRIMARY && nd[i].ln < MAXL;
    nd[i].log[nd[i].ln] = nd[i].epoch;
    nd[i].ln++;
    printf("n%d writes entry %d of epoch %d\n", i, nd[i].ln, nd[i].epoch)
}

/* Sends to `to` the entry after index p of i's log. */
inline send(i, to, p) {
    nd[i].role == PRIMARY && p < nd[i].ln;
    ap[L(i, to)].e = nd[i].epoch;
    ap[L(i, to)].pk = p;
    ap[L(i, to)].pe = (p == 0 -> 0 : nd[i].log[p - 1]);
    ap[L(i, to)].ee = nd[i].log[p];
    printf("n%d sends to n%d: epoch %d after %d\n", i, to, nd[i].epoch, p);
    reap()
}

/* Primary i acknowledges (releases the reply for) entry m_k, of its epoch:
 * the ghosts record it, and P2 is checked. */
inline acknowledge(i) {
    printf("n%d acknowledges entry %d (epoch %d) in epoch %d\n", i, m_k, nd[i].log[m_k - 1],
           nd[i].epoch);
#ifndef BROKEN_COMMIT
    assert(nd[i].role == PRIMARY && nd[i].log[m_k - 1] == nd[i].epoch);
#endif
    assert(won & (1 << nd[i].epoch)); /* P2 (with P1: the one primary of its epoch) */
    m_t = 0;
    do
    :: m_t < m_k ->
        if
        :: chain[m_t] == 0 ->
            chain[m_t] = nd[i].log[m_t];
            ackin[m_t] = nd[i].epoch
        :: else ->
            assert(chain[m_t] == nd[i].log[m_t]); /* P2 */
            if
            :: ackin[m_t] > nd[i].epoch -> ackin[m_t] = nd[i].epoch
            :: else -> skip
            fi
        fi;
        m_t++
    :: else -> break
    od;
    m_j = 0;
    do
    :: m_j < N ->
        if
        :: nd[m_j].role == PRIMARY && nd[m_j].epoch > nd[i].epoch ->
            m_t = 0;
            do
            :: m_t < m_k ->
                assert(nd[m_j].ln > m_t && nd[m_j].log[m_t] == nd[i].log[m_t]); /* P2 */
                m_t++
            :: else -> break
            od
        :: else -> skip
        fi;
        m_j++
    :: else -> break
    od
}

#ifdef SELF_FLUSHED
/* Primary i acknowledges the last entry of its epoch that it has fsynced and
 * a standby reported flushed, if any. With the witness: the last one that
 * two of the three hold (its own fsynced log, the standby's flushed entries,
 * the witness's floor), which includes the sync rule. */
inline commit(i) {
    m_k = nd[i].ln;
    do
    :: m_k > 0 && nd[i].log[m_k - 1] == nd[i].epoch ->
        if
        :: ((nd[i].fl >= m_k &&
             (nd[i].match[(i + 1) % N] >= m_k || nd[i].match[(i + 2) % N] >= m_k))
#ifdef WITNESS
            || (nd[i].match[1 - i] >= m_k && nd[i].match[W] >= m_k)
#endif
           ) ->
            acknowledge(i);
            break
        :: else -> m_k--
        fi
    :: else -> break
    od
}
#endif

/* Standby i takes the frames p sent it. */
inline recv(i, p) {
    ap[L(p, i)].e != 0;
    m_e = ap[L(p, i)].e;
    m_pk = ap[L(p, i)].pk;
    m_pe = ap[L(p, i)].pe;
    m_ee = ap[L(p, i)].ee;
    ap[L(p, i)].e = 0;
    ap[L(p, i)].pk = 0;
    ap[L(p, i)].pe = 0;
    ap[L(p, i)].ee = 0;
    printf("n%d gets frames of n%d, epoch %d after %d\n", i, p, m_e, m_pk);
    if
#ifndef BROKEN_STALE
    :: m_e < nd[i].epoch -> skip /* stale: refused */
#endif
    :: m_e > nd[i].epoch -> adopt(i, m_e)
    :: else ->
        assert(nd[i].role != PRIMARY || m_e < nd[i].epoch); /* P1 */
        clear_volatile(i)
    fi;
    if
#ifndef BROKEN_STALE
    :: m_e < nd[i].epoch -> skip
#endif
    :: m_pk == 0 || (m_pk <= nd[i].ln && nd[i].log[m_pk - 1] == m_pe) ->
        if
        :: nd[i].ln > m_pk && nd[i].log[m_pk] == m_ee -> skip
        :: else ->
            nd[i].log[m_pk] = m_ee;
            nd[i].ln = m_pk + 1;
            trim(i);
            printf("n%d: entry %d has epoch %d, log length %d\n", i, m_pk + 1, m_ee, nd[i].ln)
        fi;
        m_k = m_pk + 1;
#ifdef LAZY_FSYNC
        nd[i].fl = nd[i].ln; /* a standby fsyncs before it acks */
#endif
        /* the ack: flushed up to m_k, in epoch m_e */
        if
        :: nd[p].role == PRIMARY && nd[p].epoch == m_e ->
            printf("n%d: n%d flushed up to %d\n", p, i, m_k);
            m_t = 0;
            do
            :: m_t < m_k -> assert(nd[i].log[m_t] == nd[p].log[m_t]); m_t++ /* LM */
            :: else -> break
            od;
#ifdef SELF_FLUSHED
            if
            :: nd[p].match[i] < m_k -> nd[p].match[i] = m_k
            :: else -> skip
            fi;
            commit(p)
#else
            if
#ifdef BROKEN_COMMIT
            :: true -> acknowledge(p)
#else
            :: nd[p].log[m_k - 1] == m_e -> acknowledge(p)
#endif
            :: else -> skip
            fi
#endif
        :: else -> skip
        fi
    :: else -> skip /* does not follow on from the log: refused */
    fi;
    reap()
}

/* i learns the higher epoch of j. */
inline learn(i, j) {
    nd[j].epoch > nd[i].epoch;
    printf("n%d learns epoch %d from n%d\n", i, nd[j].epoch, j);
    m_e = nd[j].epoch;
    adopt(i, m_e);
    reap()
}

#ifdef WITNESS
/* Primary i asks the witness to keep the floor (its epoch, k): a heartbeat
 * naming floor_lsn k, its commit point while sync is in force or its durable
 * LSN while degraded; any durable entry k of its epoch (see the
 * over-approximations). */
inline send_floor(i, k) {
    nd[i].role == PRIMARY && k <= DURABLE(i) && nd[i].log[k - 1] == nd[i].epoch;
    ap[L(i, W)].e = nd[i].epoch;
    ap[L(i, W)].pk = k;
    printf("n%d sends to n%d: the floor (%d, %d)\n", i, W, nd[i].epoch, k);
#ifdef BROKEN_EARLY_FLOOR
    /* counts the witness as holding k before it stored it */
    m_k = k;
    acknowledge(i);
#endif
    reap()
}

/* The witness takes the floor that p sent it (failover.c: bq_failover_heard
 * refuses a heartbeat of a lower epoch, else adopts its epoch and
 * keep_floor stores a higher floor durably); its ack names the floor it
 * keeps for that epoch (receiver.c: kept_floor), which the primary counts
 * (feeder.c: bq_commit_floor) as a copy. */
inline take_floor(p) {
    ap[L(p, W)].e != 0;
    m_e = ap[L(p, W)].e;
    m_pk = ap[L(p, W)].pk;
    ap[L(p, W)].e = 0;
    ap[L(p, W)].pk = 0;
    printf("n%d gets the floor (%d, %d) of n%d\n", W, m_e, m_pk, p);
    if
#ifndef BROKEN_STALE_FLOOR
    :: m_e < nd[W].epoch -> skip /* stale: refused, no ack */
#endif
    :: else ->
        if
        :: m_e > nd[W].epoch -> adopt(W, m_e)
        :: else -> skip
        fi;
        if
        :: m_e > nd[W].floor_e || (m_e == nd[W].floor_e && m_pk > nd[W].floor_k) ->
            nd[W].floor_e = m_e;
            nd[W].floor_k = m_pk;
            printf("n%d keeps the floor (%d, %d)\n", W, m_e, m_pk)
        :: else -> skip
        fi;
        /* the ack: the floor kept in epoch m_e */
        if
        :: nd[p].role == PRIMARY && nd[p].epoch == m_e && nd[W].floor_e == m_e ->
            m_k = nd[W].floor_k;
            printf("n%d: n%d keeps the floor %d\n", p, W, m_k);
            assert(m_k <= nd[p].ln && nd[p].log[m_k - 1] == m_e); /* LM */
#ifdef SELF_FLUSHED
            if
            :: nd[p].match[W] < m_k -> nd[p].match[W] = m_k
            :: else -> skip
            fi;
            commit(p)
#else
            acknowledge(p)
#endif
        :: else -> skip
        fi
    fi;
    reap()
}
#endif

inline crash(i) {
    nd[i].role != FOLLOWER;
    clear_volatile(i);
    printf("n%d crashes and restarts\n", i)
}

#ifdef LAZY_FSYNC
/* A crash that keeps x entries: what was fsynced, and perhaps more. */
inline crash_keep(i, x) {
    nd[i].fl <= x && x < nd[i].ln;
    nd[i].ln = x;
    nd[i].fl = x;
    trim(i);
    clear_volatile(i);
    printf("n%d crashes and restarts with %d entries\n", i, x)
}

inline flush(i) {
    nd[i].fl < nd[i].ln;
    nd[i].fl = nd[i].ln;
    printf("n%d fsyncs %d entries\n", i, nd[i].ln);
#ifdef SELF_FLUSHED
    if
    :: nd[i].role == PRIMARY -> commit(i)
    :: else -> skip
    fi;
#endif
    skip
}
#endif

#ifndef WITNESS
proctype Node(byte i)
{
end:
    do
    :: d_step { stand(i) }
    :: d_step { vote(i, (i + 1) % N) }
    :: d_step { vote(i, (i + 2) % N) }
    :: d_step { win(i) }
    :: d_step { write(i) }
    :: d_step { send(i, (i + 1) % N, 0) }
    :: d_step { send(i, (i + 1) % N, 1) }
    :: d_step { send(i, (i + 2) % N, 0) }
    :: d_step { send(i, (i + 2) % N, 1) }
#if MAXL >= 3
    :: d_step { send(i, (i + 1) % N, 2) }
    :: d_step { send(i, (i + 2) % N, 2) }
#endif
    :: d_step { recv(i, (i + 1) % N) }
    :: d_step { recv(i, (i + 2) % N) }
    :: d_step { learn(i, (i + 1) % N) }
    :: d_step { learn(i, (i + 2) % N) }
    :: d_step { crash(i) }
#ifdef LAZY_FSYNC
    :: d_step { crash_keep(i, 0) }
    :: d_step { crash_keep(i, 1) }
#if MAXL >= 3
    :: d_step { crash_keep(i, 2) }
#endif
    :: d_step { flush(i) }
#endif
    od
}
#else
/* A data node (0 or 1): the other data node is 1 - i. */
proctype Node(byte i)
{
end:
    do
    :: d_step { stand(i) }
    :: d_step { vote(i, (1 - i)) }
    :: d_step { win(i) }
    :: d_step { write(i) }
    :: d_step { send(i, (1 - i), 0) }
    :: d_step { send(i, (1 - i), 1) }
#if MAXL >= 3
    :: d_step { send(i, (1 - i), 2) }
#endif
    :: d_step { send_floor(i, 1) }
    :: d_step { send_floor(i, 2) }
#if MAXL >= 3
    :: d_step { send_floor(i, 3) }
#endif
    :: d_step { recv(i, (1 - i)) }
    :: d_step { learn(i, (1 - i)) }
    :: d_step { learn(i, W) }
    :: d_step { crash(i) }
#ifdef LAZY_FSYNC
    :: d_step { crash_keep(i, 0) }
    :: d_step { crash_keep(i, 1) }
#if MAXL >= 3
    :: d_step { crash_keep(i, 2) }
#endif
    :: d_step { flush(i) }
#endif
    od
}

/* The witness: votes, keeps floors, learns epochs; it never stands, gets no
 * frames, and a crash changes nothing modelled (role follower, the rest
 * durable). */
proctype Witness()
{
end:
    do
    :: d_step { vote(W, 0) }
    :: d_step { vote(W, 1) }
    :: d_step { take_floor(0) }
    :: d_step { take_floor(1) }
    :: d_step { learn(W, 0) }
    :: d_step { learn(W, 1) }
    od
}
#endif

init
{
    d_step {
        nd[0].voted = NOBODY;
        nd[1].voted = NOBODY;
        nd[2].voted = NOBODY;
        stand(0)
    };
    atomic {
        run Node(0);
        run Node(1);
#ifdef WITNESS
        run Witness()
#else
        run Node(2)
#endif
    }
}
