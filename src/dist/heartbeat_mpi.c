// Heartbeats: twice a step (when it starts, and when its exchange begins) every rank sends
// 2 x step + (0 or 1) to every other one (8 bytes each, point to point, so they never wait for a
// collective), and keeps a receive from each posted. When a wait times out, the ranks whose last
// heartbeat is behind this rank's are the ones that died or hang, and the message names them.
// A rank waiting for a collective repeats its heartbeat every second (trit_dist_heartbeat_tick),
// so one that stopped inside the same collective is told apart by its silence.
#define _POSIX_C_SOURCE 200809L
#include "dist/dist_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { TAG_HEARTBEAT = 0x7e47 };

static struct {
    bool on;
    int rank, size;
    int64_t mine;        // this rank's last heartbeat
    int64_t *last;       // (size) last step heard from each rank, -1 before any
    int64_t *rbuf;       // (size) receive buffers
    MPI_Request *rreq;   // (size) posted receives (MPI_REQUEST_NULL for this rank)
    int64_t *sbuf;       // (size) send buffers
    MPI_Request *sreq;   // (size) sends in flight
    double *heard;       // (size) when each rank was last heard from (seconds, monotonic)
    double sent;         // when this rank last sent
} hb;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void poll_receives(void) {
    for (int k = 0; k < hb.size; k++) {
        int got = 1;
        while (hb.rreq[k] != MPI_REQUEST_NULL && got) {
            if (MPI_Test(&hb.rreq[k], &got, MPI_STATUS_IGNORE) != MPI_SUCCESS) return;
            if (!got) break;
            if (hb.rbuf[k] > hb.last[k]) hb.last[k] = hb.rbuf[k];
            hb.heard[k] = now_s();
            MPI_Irecv(&hb.rbuf[k], 1, MPI_INT64_T, k, TAG_HEARTBEAT, trit_dist_comm(), &hb.rreq[k]);
        }
    }
}

static bool start(void) {
    hb.rank = trit_dist_rank();
    hb.size = trit_dist_size();
    hb.last = malloc(sizeof *hb.last * (size_t)hb.size);
    hb.rbuf = malloc(sizeof *hb.rbuf * (size_t)hb.size);
    hb.sbuf = malloc(sizeof *hb.sbuf * (size_t)hb.size);
    hb.rreq = malloc(sizeof *hb.rreq * (size_t)hb.size);
    hb.sreq = malloc(sizeof *hb.sreq * (size_t)hb.size);
    hb.heard = malloc(sizeof *hb.heard * (size_t)hb.size);
    if (!hb.last || !hb.rbuf || !hb.sbuf || !hb.rreq || !hb.sreq || !hb.heard) return false;
    for (int k = 0; k < hb.size; k++) {
        hb.last[k] = -1;
        hb.heard[k] = now_s();
        hb.rreq[k] = hb.sreq[k] = MPI_REQUEST_NULL;
        if (k != hb.rank) MPI_Irecv(&hb.rbuf[k], 1, MPI_INT64_T, k, TAG_HEARTBEAT, trit_dist_comm(), &hb.rreq[k]);
    }
    hb.on = true;
    return true;
}

static void send_all(void) {
    for (int k = 0; k < hb.size; k++) {
        if (k == hb.rank) continue;
        int sent = 1;
        if (hb.sreq[k] != MPI_REQUEST_NULL) MPI_Test(&hb.sreq[k], &sent, MPI_STATUS_IGNORE);
        if (!sent) continue;  // the last one is still on its way: that says enough
        hb.sbuf[k] = hb.mine;
        MPI_Isend(&hb.sbuf[k], 1, MPI_INT64_T, k, TAG_HEARTBEAT, trit_dist_comm(), &hb.sreq[k]);
    }
    hb.sent = now_s();
}

void trit_dist_heartbeat(int64_t step, bool at_exchange) {
    if (trit_dist_size() == 1 || (!hb.on && !start())) return;
    hb.mine = 2 * step + at_exchange;
    hb.last[hb.rank] = hb.mine;
    poll_receives();
    send_all();
}

void trit_dist_heartbeat_forgive(double seconds) {
    for (int k = 0; hb.on && k < hb.size; k++) hb.heard[k] += seconds;
}

void trit_dist_heartbeat_tick(void) {
    if (!hb.on) return;
    poll_receives();
    if (now_s() - hb.sent >= 1.0) send_all();
}

static const char *where(int64_t beat) { return beat % 2 ? "at its exchange" : "computing it"; }

const char *trit_dist_heartbeat_report(void) {
    static char buf[512];
    if (!hb.on) return "no heartbeats were exchanged yet (still in setup)";
    poll_receives();
    int n = 0;
    buf[0] = 0;
    const double now = now_s();
    for (int k = 0; k < hb.size && n < (int)sizeof buf - 96; k++) {
        const double silent = now - hb.heard[k];
        if (k == hb.rank || (hb.last[k] >= hb.mine && silent < 3.0)) continue;
        if (hb.last[k] >= hb.mine) {  // as far as this rank, but silent since
            n += snprintf(buf + n, sizeof buf - (size_t)n, "%srank %d has been silent for %.0f s (last at step %lld, %s)",
                          n ? "; " : "", k, silent, (long long)(hb.last[k] / 2 + 1), where(hb.last[k]));
            continue;
        }
        if (hb.last[k] < 0) {
            n += snprintf(buf + n, sizeof buf - (size_t)n, "%srank %d never reported", n ? "; " : "", k);
            continue;
        }
        n += snprintf(buf + n, sizeof buf - (size_t)n, "%srank %d last reported step %lld (%s)", n ? "; " : "", k,
                      (long long)(hb.last[k] / 2 + 1), where(hb.last[k]));
    }
    if (n) snprintf(buf + n, sizeof buf - (size_t)n, ", this rank is at step %lld (%s): it died or hangs",
                    (long long)(hb.mine / 2 + 1), where(hb.mine));
    else snprintf(buf, sizeof buf, "every rank reported step %lld (%s)", (long long)(hb.mine / 2 + 1), where(hb.mine));
    return buf;
}

void trit_dist_heartbeat_stop(void) {
    if (!hb.on) return;
    for (int k = 0; k < hb.size; k++) {
        if (hb.rreq[k] != MPI_REQUEST_NULL) {
            MPI_Cancel(&hb.rreq[k]);
            MPI_Request_free(&hb.rreq[k]);
        }
        if (hb.sreq[k] != MPI_REQUEST_NULL) MPI_Request_free(&hb.sreq[k]);
    }
    free(hb.last);
    free(hb.rbuf);
    free(hb.sbuf);
    free(hb.rreq);
    free(hb.sreq);
    free(hb.heard);
    memset(&hb, 0, sizeof hb);
}
