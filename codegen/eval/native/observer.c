/*
 * cutegen native observer: what ran on the GPU, told to the parent in frames no candidate
 * can forge.
 *
 * Why this exists (RELIABILITY.md lessons 1 and 11): once a candidate's Python module is
 * imported into the worker process, every Python object there belongs to it. The facts a
 * verdict rests on (which kernels ran, their names, streams and GPU timestamps, which
 * modules were loaded and from where) are therefore collected here, in native code loaded
 * before any candidate code, and leave the process in frames authenticated with
 * HMAC-SHA256 under a key that lives only in this library's memory and in the parent.
 * Python code cannot read native memory once ctypes, cffi and /proc/self/mem are forbidden
 * (the worker's audit hook does that), so it cannot make a valid frame.
 *
 * C99, one file, no link-time dependency on CUDA: libcupti is dlopen()ed at run time and
 * the CUPTI/CUDA headers give types and constants only. SHA-256 and HMAC are implemented
 * here (no OpenSSL).
 *
 * ------------------------------------------------------------------------------------------
 * Exported functions (all return 0 or a negative code; cgobs_last_error() says why)
 *
 *   int cgobs_start(int key_fd, int out_fd, int ctl_fd, const char *cupti_path,
 *                   unsigned flags)
 *       Reads exactly 32 key bytes from key_fd and closes it, dlopen()s libcupti, writes
 *       HELLO, registers activity buffers (CONCURRENT_KERNEL, MEMCPY, MEMCPY2, MEMSET,
 *       RUNTIME, DRIVER), subscribes to MODULE_LOADED resource callbacks and to the driver
 *       API callbacks of every call whose name holds "Launch" (counted, see FLUSHED), and
 *       starts the flusher thread. flags: CGOBS_START_NO_API (1) leaves RUNTIME and DRIVER
 *       records off (overhead comparisons only); other bits must be 0. Callable once.
 *   int cgobs_lockdown(unsigned flags)
 *       Makes the process non-dumpable, drops the calling thread's capabilities and installs
 *       the seccomp filter described at cgobs_lockdown (x86-64 only). flags:
 *       CGOBS_LOCK_KEEP_CAPS (1), CGOBS_LOCK_KEEP_DUMPABLE (2) skip those steps.
 *   int cgobs_selftest(int key_fd, int out_fd)
 *       No CUPTI: reads the key like cgobs_start and writes the fixed sequence documented
 *       at selftest_records() through the real framing and HMAC code, then returns.
 *   int cgobs_selftest_start(int key_fd, int out_fd, int ctl_fd)
 *       No CUPTI: like cgobs_start (HELLO with the SELFTEST flag, then the fixed KERNEL,
 *       MEMCPY, MEMSET, API, MODULE and NOTE records, then a MODULE record made by the real
 *       module callback code, origin included) and starts the real flusher thread,
 *       which echoes every nonce read from ctl_fd in a FLUSHED record whose clock pair is
 *       (CLOCK_MONOTONIC, CLOCK_MONOTONIC). The parent refuses SELFTEST streams unless a
 *       test asked for one.
 *   const char *cgobs_last_error(void)
 *   int cgobs_sha256(const void *data, size_t len, unsigned char out[32])
 *   int cgobs_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len,
 *                         unsigned char out[32])
 *   long cgobs_elf_kernel_names(const void *image, size_t len, char *out, size_t cap,
 *                               unsigned *flags)
 *       The cubin parser used for MODULE records: kernel names, NUL-separated, into out;
 *       returns the count (or -1 when out is too small). flags gets MODULE flag bits.
 *
 * ------------------------------------------------------------------------------------------
 * Frame (all integers little-endian)
 *
 *   "CGOB" | u32 payload_len (<= CGOBS_MAX_PAYLOAD = 1 MiB) | u64 seq (0, 1, 2, ...)
 *   | payload | 32-byte HMAC-SHA256(key, "CGOB" | payload_len | seq | payload)
 *
 * Payload: records, each  u8 type | u32 body_len | body.
 * str16 = u16 byte length | UTF-8 bytes (no NUL). Bodies, in order, no padding:
 *
 *   1 HELLO    u16 format_version (=1) | u16 flags (1 SELFTEST, 2 NO_API) | u32 pid
 *              | u32 cupti_version (cuptiGetVersion, 0 in selftest) | clock pair
 *   2 KERNEL   u64 start | u64 end | u64 completed | u32 correlation_id | u32 stream_id
 *              | u32 device_id | u32 context_id | i32 grid_x,y,z | i32 block_x,y,z
 *              | u16 registers_per_thread | i32 static_shared | i32 dynamic_shared
 *              | u32 graph_id | u64 graph_node_id | u8 flags (1 NAME_TRUNCATED) | str16 name
 *   3 MEMCPY   u64 start | u64 end | u32 correlation_id | u32 stream_id | u64 bytes
 *              | u8 copy_kind | u8 src_kind | u8 dst_kind | u8 flags (1 PEER)
 *              | u32 device_id | u32 src_device_id | u32 dst_device_id | u32 graph_id
 *   4 MEMSET   u64 start | u64 end | u32 correlation_id | u32 stream_id | u64 bytes
 *              | u32 value | u32 device_id | u32 graph_id
 *   5 API      u8 domain (1 driver, 2 runtime) | u32 cbid | u64 start | u64 end
 *              | u32 correlation_id | u32 thread_id | u32 process_id | u32 return_value
 *              | str16 name
 *   6 MODULE   u32 module_id | u64 cubin_size | 32 bytes sha256(cubin) | u64 t_ns (CUPTI
 *              clock) | u64 mono_ns | u32 thread_id | u32 flags (1 NOT_ELF, 2 ELF_ERROR,
 *              4 NAMES_TRUNCATED, 8 NO_IMAGE, 16 NO_MAPS) | str16 origin | u16 n
 *              | n x str16 chain
 *              | u32 m | m x str16 kernel name
 *   7 FLUSHED  16 bytes nonce | clock pair | u64 dropped_total | u64 records_total
 *              | u64 launch_calls | u32 health
 *   8 NOTE     u8 level (0 info, 1 warning, 2 error) | str16 text
 *
 *   clock pair = u64 cupti_ns | u64 mono_ns | u32 bracket_ns: cuptiGetTimestamp() read
 *   between two CLOCK_MONOTONIC reads, best of three; mono_ns is the middle of the
 *   tightest bracket and bracket_ns its width.
 *
 * Times are CUPTI ns; incomplete records (start or end 0) are sent as they are: the parent
 * decides. Strings are cut at CGOBS_NAME_CAP (4096) bytes (kernel and API names, module
 * kernel names) or 1024 (origin, chain entries, notes).
 *
 * records_total counts every record written before the FLUSHED one (all types).
 * launch_calls counts entries into driver API calls whose name holds "Launch", seen by this
 * library's own callback subscription; it matches the number of DRIVER API records with
 * "Launch" in the name when the process is quiet, and a gap between them means someone
 * else took over CUPTI's activity buffers. health bits are sticky:
 *   1 SUBSCRIBER_LOST (our callback subscription no longer answers: CUPTI was finalized)
 *   2 NO_SUBSCRIBER   (another CUPTI subscriber existed at start: no MODULE records and no
 *                      launch counting)
 *   4 FLUSH_FAILED    (cuptiActivityFlushAll returned an error)
 *   8 BUFFER_ERROR    (a completed buffer could not be walked to its end)
 *  16 BUFFER_DENIED   (malloc failed for an activity buffer: records were dropped)
 *
 * MODULE origin: backtrace() from inside the callback, each frame looked up in
 * /proc/self/maps (as dladdr() would, without the loader lock dladdr takes); frames in
 * libcupti, libcuda, libcudart*, libnvidia-*, libc, libpthread, libdl, libgcc_s, ld-linux
 * and this library are skipped; the first other frame names the origin: its file's path,
 * "<anonymous>" when the code lies in no file (JIT host code, as the CuTe DSL uses),
 * "<none>" when the stack ends inside skipped objects, "<unresolved>" (flag NO_MAPS) when
 * /proc/self/maps could not be read. chain lists the objects of the first frames (this
 * library's own left out, consecutive repeats folded), at most 12.
 *
 * Writes to out_fd are serialised by one mutex. A failed write (EPIPE, EBADF, ...) marks
 * the channel dead and later records are dropped silently. No write ever raises SIGPIPE in
 * the flusher thread (it blocks every signal); the Python worker ignores SIGPIPE.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_driver_cbid.h>
#include <cupti_version.h>

#if !defined(CUPTI_API_VERSION) || CUPTI_API_VERSION < 130000
#error "cutegen's observer needs the CUPTI headers of CUDA 13 (CUPTI_API_VERSION >= 130000)"
#endif

#if defined(__x86_64__)
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#endif

#define CGOBS_API __attribute__((visibility("default")))

#if defined(__x86_64__) && !defined(SECCOMP_RET_KILL_PROCESS)
#define SECCOMP_RET_KILL_PROCESS SECCOMP_RET_KILL
#endif

#define CGOBS_FORMAT_VERSION 1
#define CGOBS_MAX_PAYLOAD (1u << 20)
#define CGOBS_HDR 16
#define CGOBS_MAC 32
#define CGOBS_NAME_CAP 4096
#define CGOBS_SHORT_CAP 1024
#define CGOBS_BUF_SIZE (8u << 20)
#define CGOBS_MAX_NAMES 20000
#define CGOBS_NAMES_BYTES (900u * 1024u) /* names + their prefixes; the record fits a frame */
#define CGOBS_CHAIN_MAX 12
#define CGOBS_BT_FRAMES 64

#define CGOBS_START_NO_API 1u
#define CGOBS_LOCK_KEEP_CAPS 1u
#define CGOBS_LOCK_KEEP_DUMPABLE 2u

enum { REC_HELLO = 1, REC_KERNEL, REC_MEMCPY, REC_MEMSET, REC_API, REC_MODULE, REC_FLUSHED,
       REC_NOTE };
enum { HELLO_SELFTEST = 1, HELLO_NO_API = 2 };
enum { MOD_NOT_ELF = 1, MOD_ELF_ERROR = 2, MOD_NAMES_TRUNCATED = 4, MOD_NO_IMAGE = 8,
       MOD_NO_MAPS = 16 };
enum { H_SUBSCRIBER_LOST = 1, H_NO_SUBSCRIBER = 2, H_FLUSH_FAILED = 4, H_BUFFER_ERROR = 8,
       H_BUFFER_DENIED = 16 };

/* ======================================================================================= */
/* SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104)                                          */

typedef struct {
    uint32_t h[8];
    uint64_t total;
    uint8_t block[64];
    size_t fill;
} sha256_ctx;

static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

#define ROTR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_compress(uint32_t h[8], const uint8_t b[64]) {
    uint32_t w[64], a, bb, c, d, e, f, g, hh;
    int i;
    for (i = 0; i < 16; i++)
        w[i] = ((uint32_t)b[4 * i] << 24) | ((uint32_t)b[4 * i + 1] << 16) |
               ((uint32_t)b[4 * i + 2] << 8) | (uint32_t)b[4 * i + 3];
    for (i = 16; i < 64; i++) {
        uint32_t s0 = ROTR(w[i - 15], 7) ^ ROTR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROTR(w[i - 2], 17) ^ ROTR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    a = h[0]; bb = h[1]; c = h[2]; d = h[3]; e = h[4]; f = h[5]; g = h[6]; hh = h[7];
    for (i = 0; i < 64; i++) {
        uint32_t S1 = ROTR(e, 6) ^ ROTR(e, 11) ^ ROTR(e, 25);
        uint32_t ch = (e & f) ^ (~e & g);
        uint32_t t1 = hh + S1 + ch + K256[i] + w[i];
        uint32_t S0 = ROTR(a, 2) ^ ROTR(a, 13) ^ ROTR(a, 22);
        uint32_t mj = (a & bb) ^ (a & c) ^ (bb & c);
        uint32_t t2 = S0 + mj;
        hh = g; g = f; f = e; e = d + t1; d = c; c = bb; bb = a; a = t1 + t2;
    }
    h[0] += a; h[1] += bb; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}

static void sha256_init(sha256_ctx *c) {
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, iv, sizeof iv);
    c->total = 0;
    c->fill = 0;
}

static void sha256_update(sha256_ctx *c, const void *data, size_t len) {
    const uint8_t *p = (const uint8_t *)data;
    c->total += len;
    if (c->fill) {
        size_t take = 64 - c->fill;
        if (take > len) take = len;
        memcpy(c->block + c->fill, p, take);
        c->fill += take; p += take; len -= take;
        if (c->fill == 64) { sha256_compress(c->h, c->block); c->fill = 0; }
    }
    while (len >= 64) { sha256_compress(c->h, p); p += 64; len -= 64; }
    if (len) { memcpy(c->block, p, len); c->fill = len; }
}

static void sha256_final(sha256_ctx *c, uint8_t out[32]) {
    uint64_t bits = c->total * 8;
    uint8_t pad = 0x80, zero = 0, lenb[8];
    int i;
    sha256_update(c, &pad, 1);
    while (c->fill != 56) sha256_update(c, &zero, 1);
    for (i = 0; i < 8; i++) lenb[i] = (uint8_t)(bits >> (56 - 8 * i));
    sha256_update(c, lenb, 8);
    for (i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(c->h[i] >> 24); out[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(c->h[i] >> 8); out[4 * i + 3] = (uint8_t)c->h[i];
    }
}

/* The two keyed states of HMAC, derived once; the raw key is wiped after. */
typedef struct {
    sha256_ctx inner, outer;
} hmac_key;

static void wipe(void *p, size_t n) {
    volatile uint8_t *v = (volatile uint8_t *)p;
    while (n--) *v++ = 0;
}

static void hmac_setkey(hmac_key *k, const uint8_t *key, size_t len) {
    uint8_t kb[64], pad[64];
    size_t i;
    memset(kb, 0, sizeof kb);
    if (len > 64) {
        sha256_ctx c;
        sha256_init(&c); sha256_update(&c, key, len); sha256_final(&c, kb);
    } else {
        memcpy(kb, key, len);
    }
    for (i = 0; i < 64; i++) pad[i] = kb[i] ^ 0x36;
    sha256_init(&k->inner); sha256_update(&k->inner, pad, 64);
    for (i = 0; i < 64; i++) pad[i] = kb[i] ^ 0x5c;
    sha256_init(&k->outer); sha256_update(&k->outer, pad, 64);
    wipe(kb, sizeof kb); wipe(pad, sizeof pad);
}

static void hmac_two(const hmac_key *k, const void *a, size_t alen, const void *b, size_t blen,
                     uint8_t out[32]) {
    sha256_ctx c = k->inner;
    uint8_t ih[32];
    sha256_update(&c, a, alen);
    if (blen) sha256_update(&c, b, blen);
    sha256_final(&c, ih);
    c = k->outer;
    sha256_update(&c, ih, 32);
    sha256_final(&c, out);
}

/* ======================================================================================= */
/* Errors, clocks, small helpers                                                            */

static char g_err[1024];

static int fail(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_err, sizeof g_err, fmt, ap);
    va_end(ap);
    return code;
}

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint32_t my_tid(void) { return (uint32_t)syscall(SYS_gettid); }

static int read_exact(int fd, uint8_t *p, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, p + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

/* ======================================================================================= */
/* Growable byte buffer and record encoding                                                 */

typedef struct {
    uint8_t *p;
    size_t len, cap;
    int oom;
} buf_t;

static int b_reserve(buf_t *b, size_t more) {
    size_t want;
    uint8_t *q;
    if (b->oom) return -1;
    if (b->len + more <= b->cap) return 0;
    want = b->cap ? b->cap : 256;
    while (want < b->len + more) want *= 2;
    q = (uint8_t *)realloc(b->p, want);
    if (!q) { b->oom = 1; return -1; }
    b->p = q; b->cap = want;
    return 0;
}

static void b_put(buf_t *b, const void *src, size_t n) {
    if (b_reserve(b, n)) return;
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void b_u8(buf_t *b, uint8_t v) { b_put(b, &v, 1); }
static void b_u16(buf_t *b, uint16_t v) {
    uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    b_put(b, x, 2);
}
static void b_u32(buf_t *b, uint32_t v) {
    uint8_t x[4]; int i;
    for (i = 0; i < 4; i++) x[i] = (uint8_t)(v >> (8 * i));
    b_put(b, x, 4);
}
static void b_u64(buf_t *b, uint64_t v) {
    uint8_t x[8]; int i;
    for (i = 0; i < 8; i++) x[i] = (uint8_t)(v >> (8 * i));
    b_put(b, x, 8);
}
static void b_i32(buf_t *b, int32_t v) { b_u32(b, (uint32_t)v); }

/* str16 of at most cap bytes; returns 1 when the string was cut. */
static int b_str16(buf_t *b, const char *s, size_t cap) {
    size_t n = s ? strlen(s) : 0;
    int cut = 0;
    if (cap > 65535) cap = 65535;
    if (n > cap) { n = cap; cut = 1; }
    b_u16(b, (uint16_t)n);
    if (n) b_put(b, s, n);
    return cut;
}

static void put_le32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

static size_t rec_begin(buf_t *b, uint8_t type) {
    size_t at;
    b_u8(b, type);
    at = b->len;
    b_u32(b, 0);
    return at;
}

static void rec_end(buf_t *b, size_t at) {
    if (!b->oom) put_le32(b->p + at, (uint32_t)(b->len - at - 4));
}

typedef struct {
    uint64_t cupti_ns, mono_ns;
    uint32_t bracket_ns;
} clock_pair;

static void b_clock(buf_t *b, const clock_pair *c) {
    b_u64(b, c->cupti_ns); b_u64(b, c->mono_ns); b_u32(b, c->bracket_ns);
}

/* ======================================================================================= */
/* The channel: framing, HMAC, serialised writes                                            */

typedef struct {
    hmac_key key;
    int fd;
    int dead;
    uint64_t seq;
    uint64_t records;
    pthread_mutex_t lock;
} chan_t;

static int write_all(int fd, const uint8_t *p, size_t n) {
    uint64_t deadline = 0;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w > 0) { p += w; n -= (size_t)w; continue; }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            /* Someone made the descriptor non-blocking: wait, but not for ever. */
            struct pollfd pfd;
            uint64_t now = mono_ns();
            if (!deadline) deadline = now + 30ull * 1000000000ull;
            if (now > deadline) return -1;
            pfd.fd = fd; pfd.events = POLLOUT; pfd.revents = 0;
            if (poll(&pfd, 1, 1000) < 0 && errno != EINTR) return -1;
            continue;
        }
        return -1;
    }
    return 0;
}

/* frame->p holds CGOBS_HDR free bytes, then the payload; called with ch->lock held. */
static void chan_emit_locked(chan_t *ch, buf_t *frame, unsigned nrec) {
    size_t plen = frame->len - CGOBS_HDR;
    uint8_t *h = frame->p, mac[CGOBS_MAC];
    int i;
    if (ch->dead || frame->oom || plen == 0) return;
    if (plen > CGOBS_MAX_PAYLOAD) { ch->dead = 1; return; }
    memcpy(h, "CGOB", 4);
    put_le32(h + 4, (uint32_t)plen);
    for (i = 0; i < 8; i++) h[8 + i] = (uint8_t)(ch->seq >> (8 * i));
    hmac_two(&ch->key, frame->p, frame->len, NULL, 0, mac);
    b_put(frame, mac, CGOBS_MAC);
    if (frame->oom || write_all(ch->fd, frame->p, frame->len)) {
        ch->dead = 1;
    } else {
        ch->seq++;
        ch->records += nrec;
    }
    frame->len -= CGOBS_MAC;
}

/* A batch collects records into one frame and emits it when the next would not fit. */
typedef struct {
    chan_t *ch;
    buf_t f;
    unsigned nrec;
} batch_t;

static void batch_init(batch_t *bt, chan_t *ch) {
    memset(bt, 0, sizeof *bt);
    bt->ch = ch;
    b_reserve(&bt->f, 64 * 1024);
    bt->f.len = CGOBS_HDR;
}

static void batch_emit(batch_t *bt) {
    if (bt->nrec) {
        pthread_mutex_lock(&bt->ch->lock);
        chan_emit_locked(bt->ch, &bt->f, bt->nrec);
        pthread_mutex_unlock(&bt->ch->lock);
    }
    bt->f.len = CGOBS_HDR;
    bt->f.oom = 0;
    bt->nrec = 0;
}

static void batch_add(batch_t *bt, const buf_t *rec) {
    if (rec->oom || rec->len > CGOBS_MAX_PAYLOAD) return;
    if (bt->f.len - CGOBS_HDR + rec->len > CGOBS_MAX_PAYLOAD) batch_emit(bt);
    b_put(&bt->f, rec->p, rec->len);
    bt->nrec++;
}

static void batch_free(batch_t *bt) { free(bt->f.p); bt->f.p = NULL; }

/* ======================================================================================= */
/* CUPTI entry points, found with dlsym                                                     */

#define CUPTI_FUNCS(X)                                                                      \
    X(cuptiGetVersion) X(cuptiGetResultString) X(cuptiGetTimestamp)                         \
    X(cuptiActivityRegisterCallbacks) X(cuptiActivityEnable) X(cuptiActivityDisable)        \
    X(cuptiActivityFlushAll) X(cuptiActivityGetNextRecord)                                  \
    X(cuptiActivityGetNumDroppedRecords) X(cuptiGetCallbackName) X(cuptiSubscribe)          \
    X(cuptiUnsubscribe) X(cuptiEnableCallback) X(cuptiGetCallbackState)

#define DECLARE_PTR(name) static __typeof__(name) *p_##name;
CUPTI_FUNCS(DECLARE_PTR)

/* ======================================================================================= */
/* Global observer state                                                                    */

static chan_t g_ch = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1};
static pthread_mutex_t g_start_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_started;      /* 0 never, 1 CUPTI observer, 2 selftest observer, -1 failed */
static int g_use_cupti;
static int g_ctl_fd = -1;
static CUpti_SubscriberHandle g_sub;
static int g_subscribed;
static uint32_t g_health;  /* H_* bits, updated with __atomic_or_fetch */
static uint64_t g_dropped; /* __atomic */
static uint64_t g_launch_calls; /* __atomic */
static char g_self_path[4096];

static const char *cupti_err(CUptiResult r) {
    const char *s = NULL;
    if (p_cuptiGetResultString && p_cuptiGetResultString(r, &s) == CUPTI_SUCCESS && s) return s;
    return "unknown CUPTI error";
}

static void health_set(uint32_t bits) { __atomic_or_fetch(&g_health, bits, __ATOMIC_RELAXED); }

/* Best of three: the tightest CLOCK_MONOTONIC bracket around a non-zero CUPTI time. */
static void sample_clock(clock_pair *out) {
    int i;
    out->bracket_ns = UINT32_MAX;
    out->cupti_ns = out->mono_ns = 0;
    for (i = 0; i < 3; i++) {
        uint64_t m1 = mono_ns(), c = 0, m2, w;
        if (g_use_cupti) {
            if (p_cuptiGetTimestamp(&c) != CUPTI_SUCCESS) c = 0;
        } else {
            c = mono_ns(); /* selftest: the identity clock */
        }
        m2 = mono_ns();
        w = m2 - m1;
        if (w > UINT32_MAX - 1) w = UINT32_MAX - 1;
        if ((c && !out->cupti_ns) || ((c || !out->cupti_ns) && w < out->bracket_ns)) {
            out->bracket_ns = (uint32_t)w;
            out->cupti_ns = c;
            out->mono_ns = m1 + (m2 - m1) / 2;
        }
    }
}

/* Callback names, cached per (domain, cbid) below 1024; "interesting" = worth a record. */
#define NAME_CACHE 1024
static const char *g_names[2][NAME_CACHE];
static signed char g_interest[2][NAME_CACHE]; /* 0 unknown, 1 yes, 2 no */

static const char *const INTERESTING[] = {
    "Launch", "Memcpy", "Memset", "ModuleLoad", "LibraryLoad", "LinkComplete", "GraphLaunch",
    "GraphInstantiate", "CtxCreate", "StreamCreate", "ProfilerStart", "ProfilerStop"};

static const char *api_name(int dom_index, CUpti_CallbackDomain domain, uint32_t cbid,
                            int *interesting) {
    const char *name = NULL;
    size_t i;
    int yes = 0;
    if (cbid < NAME_CACHE) {
        signed char st = __atomic_load_n(&g_interest[dom_index][cbid], __ATOMIC_ACQUIRE);
        if (st) {
            *interesting = st == 1;
            return __atomic_load_n(&g_names[dom_index][cbid], __ATOMIC_RELAXED);
        }
    }
    if (p_cuptiGetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS) name = NULL;
    if (name)
        for (i = 0; i < sizeof INTERESTING / sizeof INTERESTING[0]; i++)
            if (strstr(name, INTERESTING[i])) { yes = 1; break; }
    if (cbid < NAME_CACHE) {
        __atomic_store_n(&g_names[dom_index][cbid], name, __ATOMIC_RELAXED);
        __atomic_store_n(&g_interest[dom_index][cbid], (signed char)(yes ? 1 : 2),
                         __ATOMIC_RELEASE);
    }
    *interesting = yes;
    return name;
}

/* ======================================================================================= */
/* Activity records -> compact records                                                      */

static void encode_activity(const CUpti_Activity *a, buf_t *r) {
    size_t at;
    switch (a->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)a;
        size_t flag_at;
        at = rec_begin(r, REC_KERNEL);
        b_u64(r, k->start); b_u64(r, k->end); b_u64(r, k->completed);
        b_u32(r, k->correlationId); b_u32(r, k->streamId); b_u32(r, k->deviceId);
        b_u32(r, k->contextId);
        b_i32(r, k->gridX); b_i32(r, k->gridY); b_i32(r, k->gridZ);
        b_i32(r, k->blockX); b_i32(r, k->blockY); b_i32(r, k->blockZ);
        b_u16(r, k->registersPerThread);
        b_i32(r, k->staticSharedMemory); b_i32(r, k->dynamicSharedMemory);
        b_u32(r, k->graphId); b_u64(r, k->graphNodeId);
        flag_at = r->len;
        b_u8(r, 0);
        if (b_str16(r, k->name, CGOBS_NAME_CAP) && !r->oom) r->p[flag_at] |= 1;
        rec_end(r, at);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)a;
        at = rec_begin(r, REC_MEMCPY);
        b_u64(r, m->start); b_u64(r, m->end); b_u32(r, m->correlationId);
        b_u32(r, m->streamId); b_u64(r, m->bytes);
        b_u8(r, m->copyKind); b_u8(r, m->srcKind); b_u8(r, m->dstKind); b_u8(r, 0);
        b_u32(r, m->deviceId); b_u32(r, m->deviceId); b_u32(r, m->deviceId);
        b_u32(r, m->graphId);
        rec_end(r, at);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {
        const CUpti_ActivityMemcpyPtoP4 *m = (const CUpti_ActivityMemcpyPtoP4 *)a;
        at = rec_begin(r, REC_MEMCPY);
        b_u64(r, m->start); b_u64(r, m->end); b_u32(r, m->correlationId);
        b_u32(r, m->streamId); b_u64(r, m->bytes);
        b_u8(r, m->copyKind); b_u8(r, m->srcKind); b_u8(r, m->dstKind); b_u8(r, 1);
        b_u32(r, m->deviceId); b_u32(r, m->srcDeviceId); b_u32(r, m->dstDeviceId);
        b_u32(r, m->graphId);
        rec_end(r, at);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)a;
        at = rec_begin(r, REC_MEMSET);
        b_u64(r, m->start); b_u64(r, m->end); b_u32(r, m->correlationId);
        b_u32(r, m->streamId); b_u64(r, m->bytes); b_u32(r, m->value);
        b_u32(r, m->deviceId); b_u32(r, m->graphId);
        rec_end(r, at);
        break;
    }
    case CUPTI_ACTIVITY_KIND_DRIVER:
    case CUPTI_ACTIVITY_KIND_RUNTIME: {
        const CUpti_ActivityAPI *api = (const CUpti_ActivityAPI *)a;
        int drv = a->kind == CUPTI_ACTIVITY_KIND_DRIVER, yes = 0;
        const char *name = api_name(drv ? 0 : 1,
                                    drv ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API,
                                    api->cbid, &yes);
        if (!yes) break;
        at = rec_begin(r, REC_API);
        b_u8(r, drv ? 1 : 2); b_u32(r, api->cbid); b_u64(r, api->start); b_u64(r, api->end);
        b_u32(r, api->correlationId); b_u32(r, api->threadId); b_u32(r, api->processId);
        b_u32(r, api->returnValue);
        b_str16(r, name, CGOBS_NAME_CAP);
        rec_end(r, at);
        break;
    }
    default:
        break;
    }
}

static void CUPTIAPI on_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    void *p = NULL;
    if (posix_memalign(&p, 8, CGOBS_BUF_SIZE) != 0) {
        p = NULL;
        health_set(H_BUFFER_DENIED);
    }
    *buffer = (uint8_t *)p;
    *size = p ? CGOBS_BUF_SIZE : 0;
    *max_records = 0;
}

static void count_dropped(void) {
    size_t d = 0;
    if (p_cuptiActivityGetNumDroppedRecords &&
        p_cuptiActivityGetNumDroppedRecords(NULL, 0, &d) == CUPTI_SUCCESS && d)
        __atomic_add_fetch(&g_dropped, (uint64_t)d, __ATOMIC_RELAXED);
}

static void CUPTIAPI on_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer,
                                         size_t size, size_t valid) {
    batch_t bt;
    buf_t r = {0};
    CUpti_Activity *a = NULL;
    (void)ctx; (void)stream; (void)size;
    if (!buffer) return;
    batch_init(&bt, &g_ch);
    for (;;) {
        CUptiResult st = p_cuptiActivityGetNextRecord(buffer, valid, &a);
        if (st != CUPTI_SUCCESS) {
            if (st != CUPTI_ERROR_MAX_LIMIT_REACHED) health_set(H_BUFFER_ERROR);
            break;
        }
        r.len = 0; r.oom = 0;
        encode_activity(a, &r);
        if (r.len) batch_add(&bt, &r);
    }
    batch_emit(&bt);
    batch_free(&bt);
    free(r.p);
    count_dropped();
    free(buffer);
}

/* ======================================================================================= */
/* Cubin (ELF64) kernel names                                                               */

typedef struct {
    const uint8_t *img;
    size_t n;
} image_t;

static int img_range(const image_t *im, uint64_t off, uint64_t len) {
    return off <= im->n && len <= im->n - off;
}

/* A NUL-terminated string at tab[idx] within a table of tabsz bytes, or NULL. */
static const char *img_str(const image_t *im, uint64_t tab, uint64_t tabsz, uint64_t idx) {
    const uint8_t *s, *nul;
    if (!img_range(im, tab, tabsz) || idx >= tabsz) return NULL;
    s = im->img + tab + idx;
    nul = (const uint8_t *)memchr(s, 0, (size_t)(tabsz - idx));
    return nul ? (const char *)s : NULL;
}

static int get_shdr(const image_t *im, const Elf64_Ehdr *eh, uint64_t i, Elf64_Shdr *sh) {
    uint64_t off = eh->e_shoff + i * (uint64_t)sizeof(Elf64_Shdr);
    if (!img_range(im, off, sizeof(Elf64_Shdr))) return -1;
    memcpy(sh, im->img + off, sizeof *sh);
    return 0;
}

typedef void (*name_sink)(void *ctx, const char *name);

/* Walks GLOBAL FUNC symbols whose section is ".text.<name>"; returns MOD_* flags. */
static unsigned elf_walk(const uint8_t *img, size_t n, name_sink sink, void *ctx) {
    image_t im = {img, n};
    Elf64_Ehdr eh;
    Elf64_Shdr sh0, shstr;
    uint64_t shnum, shstrndx, i, count = 0, bytes = 0;
    if (!img || n == 0) return MOD_NO_IMAGE;
    if (n < sizeof eh) return MOD_NOT_ELF;
    memcpy(&eh, img, sizeof eh);
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_ident[EI_DATA] != ELFDATA2LSB)
        return MOD_NOT_ELF;
    if (eh.e_shoff == 0 || eh.e_shentsize != sizeof(Elf64_Shdr)) return MOD_ELF_ERROR;
    if (get_shdr(&im, &eh, 0, &sh0)) return MOD_ELF_ERROR;
    shnum = eh.e_shnum ? eh.e_shnum : sh0.sh_size;
    shstrndx = eh.e_shstrndx == SHN_XINDEX ? sh0.sh_link : eh.e_shstrndx;
    if (shnum == 0 || shnum > n / sizeof(Elf64_Shdr) ||
        !img_range(&im, eh.e_shoff, shnum * sizeof(Elf64_Shdr)) || shstrndx >= shnum)
        return MOD_ELF_ERROR;
    if (get_shdr(&im, &eh, shstrndx, &shstr) || shstr.sh_type == SHT_NOBITS ||
        !img_range(&im, shstr.sh_offset, shstr.sh_size))
        return MOD_ELF_ERROR;
    for (i = 0; i < shnum; i++) {
        Elf64_Shdr symtab, strtab;
        uint64_t nsym, j;
        if (get_shdr(&im, &eh, i, &symtab)) return MOD_ELF_ERROR;
        if (symtab.sh_type != SHT_SYMTAB) continue;
        if ((symtab.sh_entsize && symtab.sh_entsize != sizeof(Elf64_Sym)) ||
            !img_range(&im, symtab.sh_offset, symtab.sh_size) || symtab.sh_link >= shnum ||
            get_shdr(&im, &eh, symtab.sh_link, &strtab) || strtab.sh_type == SHT_NOBITS ||
            !img_range(&im, strtab.sh_offset, strtab.sh_size))
            return MOD_ELF_ERROR;
        nsym = symtab.sh_size / sizeof(Elf64_Sym);
        for (j = 0; j < nsym; j++) {
            Elf64_Sym sym;
            Elf64_Shdr sec;
            const char *name, *secname;
            size_t len;
            memcpy(&sym, img + symtab.sh_offset + j * sizeof(Elf64_Sym), sizeof sym);
            if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || ELF64_ST_BIND(sym.st_info) != STB_GLOBAL)
                continue;
            if (sym.st_shndx == SHN_UNDEF || sym.st_shndx >= SHN_LORESERVE ||
                sym.st_shndx >= shnum)
                continue;
            name = img_str(&im, strtab.sh_offset, strtab.sh_size, sym.st_name);
            if (!name || !*name || get_shdr(&im, &eh, sym.st_shndx, &sec)) continue;
            secname = img_str(&im, shstr.sh_offset, shstr.sh_size, sec.sh_name);
            if (!secname || strncmp(secname, ".text.", 6) != 0 || strcmp(secname + 6, name) != 0)
                continue;
            len = strlen(name);
            if (len > CGOBS_NAME_CAP) len = CGOBS_NAME_CAP;
            if (count >= CGOBS_MAX_NAMES || bytes + len + 2 > CGOBS_NAMES_BYTES)
                return MOD_NAMES_TRUNCATED;
            count++;
            bytes += len + 2;
            sink(ctx, name);
        }
    }
    return 0;
}

typedef struct {
    buf_t *b;
    uint32_t count;
    unsigned cut;
} names_rec;

static void sink_record(void *ctx, const char *name) {
    names_rec *nr = (names_rec *)ctx;
    if (b_str16(nr->b, name, CGOBS_NAME_CAP)) nr->cut = 1;
    nr->count++;
}

typedef struct {
    char *out;
    size_t cap, used;
    long count;
    int overflow;
} names_flat;

static void sink_flat(void *ctx, const char *name) {
    names_flat *nf = (names_flat *)ctx;
    size_t len = strlen(name);
    if (len > CGOBS_NAME_CAP) len = CGOBS_NAME_CAP;
    if (nf->overflow || nf->used + len + 1 > nf->cap) { nf->overflow = 1; return; }
    memcpy(nf->out + nf->used, name, len);
    nf->out[nf->used + len] = 0;
    nf->used += len + 1;
    nf->count++;
}

/* ======================================================================================= */
/* MODULE records: hash, names, origin                                                      */

static int skipped_object(const char *path) {
    static const char *const PREFIXES[] = {"libcupti", "libcuda.", "libcuda-", "libcudart",
                                           "libnvidia-", "libc.", "libc-", "libpthread",
                                           "libdl.", "libdl-", "libgcc_s", "ld-linux"};
    const char *base = strrchr(path, '/');
    size_t i;
    base = base ? base + 1 : path;
    if (g_self_path[0] && strcmp(path, g_self_path) == 0) return 1;
    for (i = 0; i < sizeof PREFIXES / sizeof PREFIXES[0]; i++)
        if (strncmp(base, PREFIXES[i], strlen(PREFIXES[i])) == 0) return 1;
    return 0;
}

/*
 * Frames are mapped to objects through /proc/self/maps, not dladdr(): dladdr takes the
 * loader's lock, which a thread inside dlopen() holds while it runs library constructors;
 * one that calls into CUDA would then wait for the driver lock this callback runs under.
 */
typedef struct {
    uintptr_t lo, hi;
    const char *path;
} map_ent;

typedef struct {
    char *text;
    map_ent *e;
    size_t n;
} maps_t;

static int maps_load(maps_t *m) {
    size_t cap = 1u << 16, len = 0, ecap = 256;
    char *line;
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    memset(m, 0, sizeof *m);
    if (fd < 0) return -1;
    m->text = (char *)malloc(cap);
    m->e = (map_ent *)malloc(ecap * sizeof(map_ent));
    if (!m->text || !m->e) goto bad;
    for (;;) {
        ssize_t k;
        if (len + 4096 + 1 > cap) {
            char *t = (char *)realloc(m->text, cap * 2);
            if (!t) goto bad;
            m->text = t;
            cap *= 2;
        }
        k = read(fd, m->text + len, cap - len - 1);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) goto bad;
        if (k == 0) break;
        len += (size_t)k;
    }
    close(fd);
    fd = -1;
    m->text[len] = 0;
    for (line = m->text; line && *line;) {
        char *nl = strchr(line, '\n'), perms[8];
        unsigned long lo, hi;
        int at = 0;
        if (nl) *nl = 0;
        if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, perms, &at) >= 3 &&
            strchr(perms, 'x')) {
            if (m->n == ecap) {
                map_ent *e = (map_ent *)realloc(m->e, ecap * 2 * sizeof(map_ent));
                if (!e) goto bad;
                m->e = e;
                ecap *= 2;
            }
            m->e[m->n].lo = (uintptr_t)lo;
            m->e[m->n].hi = (uintptr_t)hi;
            m->e[m->n].path = at > 0 ? line + at : "";
            m->n++;
        }
        line = nl ? nl + 1 : NULL;
    }
    return 0;
bad:
    if (fd >= 0) close(fd);
    free(m->text);
    free(m->e);
    memset(m, 0, sizeof *m);
    return -1;
}

/* The file a code address belongs to, or NULL for anonymous memory (JIT code). */
static const char *maps_find(const maps_t *m, void *pc) {
    uintptr_t a = (uintptr_t)pc;
    size_t i;
    for (i = 0; i < m->n; i++)
        if (a >= m->e[i].lo && a < m->e[i].hi)
            return m->e[i].path[0] == '/' ? m->e[i].path : NULL;
    return NULL;
}

static void encode_module(buf_t *r, const CUpti_ModuleResourceData *md) {
    void *frames[CGOBS_BT_FRAMES];
    const char *chain[CGOBS_CHAIN_MAX], *origin = NULL;
    int nframes, i, nchain = 0;
    uint8_t digest[32];
    clock_pair now;
    names_rec nr;
    unsigned flags = 0;
    size_t at, flags_at, count_at;
    const uint8_t *img = md ? (const uint8_t *)md->pCubin : NULL;
    size_t n = md && md->pCubin ? md->cubinSize : 0;
    sha256_ctx c;

    maps_t maps;
    int have_maps = maps_load(&maps) == 0;

    nframes = backtrace(frames, CGOBS_BT_FRAMES);
    for (i = 0; i < nframes && have_maps; i++) {
        const char *obj = maps_find(&maps, frames[i]);
        const char *shown = obj ? obj : "<anonymous>";
        if (obj && g_self_path[0] && strcmp(obj, g_self_path) == 0) continue;
        if (nchain < CGOBS_CHAIN_MAX && (nchain == 0 || strcmp(chain[nchain - 1], shown) != 0))
            chain[nchain++] = shown;
        if (!origin && (!obj || !skipped_object(obj))) origin = shown;
    }
    if (!origin) origin = have_maps ? "<none>" : "<unresolved>";

    sha256_init(&c);
    if (n) sha256_update(&c, img, n);
    sha256_final(&c, digest);
    sample_clock(&now);

    at = rec_begin(r, REC_MODULE);
    b_u32(r, md ? md->moduleId : 0);
    b_u64(r, (uint64_t)n);
    b_put(r, digest, 32);
    b_u64(r, now.cupti_ns);
    b_u64(r, now.mono_ns);
    b_u32(r, my_tid());
    flags_at = r->len;
    b_u32(r, 0);
    b_str16(r, origin, CGOBS_SHORT_CAP);
    b_u16(r, (uint16_t)nchain);
    for (i = 0; i < nchain; i++) b_str16(r, chain[i], CGOBS_SHORT_CAP);
    count_at = r->len;
    b_u32(r, 0);
    nr.b = r; nr.count = 0; nr.cut = 0;
    flags = elf_walk(img, n, sink_record, &nr);
    if (nr.cut) flags |= MOD_NAMES_TRUNCATED;
    if (!have_maps) flags |= MOD_NO_MAPS;
    if (!r->oom) {
        put_le32(r->p + flags_at, flags);
        put_le32(r->p + count_at, nr.count);
    }
    rec_end(r, at);
    if (have_maps) {
        free(maps.text);
        free(maps.e);
    }
}

static void CUPTIAPI on_callback(void *userdata, CUpti_CallbackDomain domain,
                                 CUpti_CallbackId cbid, const void *cbdata) {
    (void)userdata;
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
        const CUpti_CallbackData *d = (const CUpti_CallbackData *)cbdata;
        if (d && d->callbackSite == CUPTI_API_ENTER)
            __atomic_add_fetch(&g_launch_calls, 1, __ATOMIC_RELAXED);
        return;
    }
    if (domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_MODULE_LOADED) {
        const CUpti_ResourceData *rd = (const CUpti_ResourceData *)cbdata;
        const CUpti_ModuleResourceData *md =
            rd ? (const CUpti_ModuleResourceData *)rd->resourceDescriptor : NULL;
        batch_t bt;
        buf_t r = {0};
        encode_module(&r, md);
        batch_init(&bt, &g_ch);
        batch_add(&bt, &r);
        batch_emit(&bt);
        batch_free(&bt);
        free(r.p);
    }
}

/* ======================================================================================= */
/* HELLO, NOTE, FLUSHED                                                                     */

static void encode_hello(buf_t *r, uint16_t flags, uint32_t cupti_version,
                         const clock_pair *cp) {
    size_t at = rec_begin(r, REC_HELLO);
    b_u16(r, CGOBS_FORMAT_VERSION);
    b_u16(r, flags);
    b_u32(r, (uint32_t)getpid());
    b_u32(r, cupti_version);
    b_clock(r, cp);
    rec_end(r, at);
}

static void encode_note(buf_t *r, uint8_t level, const char *text) {
    size_t at = rec_begin(r, REC_NOTE);
    b_u8(r, level);
    b_str16(r, text, CGOBS_SHORT_CAP);
    rec_end(r, at);
}

static void emit_one(chan_t *ch, buf_t *r) {
    batch_t bt;
    batch_init(&bt, ch);
    batch_add(&bt, r);
    batch_emit(&bt);
    batch_free(&bt);
}

static void emit_note(chan_t *ch, uint8_t level, const char *fmt, ...) {
    char text[CGOBS_SHORT_CAP];
    buf_t r = {0};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    encode_note(&r, level, text);
    emit_one(ch, &r);
    free(r.p);
}

/* FLUSHED is built under the channel lock, so records_total is exact. */
static void emit_flushed(chan_t *ch, const uint8_t nonce[16], const clock_pair *cp,
                         uint64_t dropped, uint64_t launches, uint32_t health) {
    buf_t f = {0};
    size_t at;
    b_reserve(&f, 256);
    f.len = CGOBS_HDR;
    pthread_mutex_lock(&ch->lock);
    at = rec_begin(&f, REC_FLUSHED);
    b_put(&f, nonce, 16);
    b_clock(&f, cp);
    b_u64(&f, dropped);
    b_u64(&f, ch->records);
    b_u64(&f, launches);
    b_u32(&f, health);
    rec_end(&f, at);
    chan_emit_locked(ch, &f, 1);
    pthread_mutex_unlock(&ch->lock);
    free(f.p);
}

/* ======================================================================================= */
/* The flusher thread                                                                       */

static void check_subscriber(void) {
    uint32_t enabled = 0;
    if (!g_subscribed) return;
    if (p_cuptiGetCallbackState(&enabled, g_sub, CUPTI_CB_DOMAIN_RESOURCE,
                                CUPTI_CBID_RESOURCE_MODULE_LOADED) != CUPTI_SUCCESS ||
        !enabled)
        health_set(H_SUBSCRIBER_LOST);
}

static void do_flush(const uint8_t nonce[16]) {
    clock_pair cp;
    if (g_use_cupti) {
        if (p_cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != CUPTI_SUCCESS)
            health_set(H_FLUSH_FAILED);
        count_dropped();
        check_subscriber();
    }
    sample_clock(&cp);
    emit_flushed(&g_ch, nonce, &cp, __atomic_load_n(&g_dropped, __ATOMIC_RELAXED),
                 __atomic_load_n(&g_launch_calls, __ATOMIC_RELAXED),
                 __atomic_load_n(&g_health, __ATOMIC_RELAXED));
}

static void *flusher_main(void *arg) {
    sigset_t all;
    uint8_t nonce[16], buf[256];
    int want = -1; /* -1: waiting for 'F'; 0..15: nonce bytes held */
    (void)arg;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    for (;;) {
        struct pollfd pfd;
        int r;
        ssize_t k, i;
        pfd.fd = g_ctl_fd; pfd.events = POLLIN; pfd.revents = 0;
        r = poll(&pfd, 1, 100);
        if (r < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (r == 0) {
            if (g_use_cupti) p_cuptiActivityFlushAll(0);
            continue;
        }
        if (pfd.revents & POLLNVAL) break;
        k = read(g_ctl_fd, buf, sizeof buf);
        if (k < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
            break;
        }
        if (k == 0) break;
        for (i = 0; i < k; i++) {
            if (want < 0) {
                if (buf[i] == 'F') want = 0;
                continue;
            }
            nonce[want++] = buf[i];
            if (want == 16) {
                do_flush(nonce);
                want = -1;
            }
        }
    }
    return NULL;
}

static int start_flusher(void) {
    pthread_t t;
    pthread_attr_t attr;
    int rc;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&t, &attr, flusher_main, NULL);
    pthread_attr_destroy(&attr);
    return rc;
}

/* ======================================================================================= */
/* Start                                                                                    */

static int load_key(chan_t *ch, int key_fd) {
    uint8_t key[32];
    int rc = read_exact(key_fd, key, sizeof key);
    close(key_fd);
    if (rc) {
        wipe(key, sizeof key);
        return fail(-2, "could not read the 32-byte key from fd %d", key_fd);
    }
    hmac_setkey(&ch->key, key, sizeof key);
    wipe(key, sizeof key);
    return 0;
}

static void remember_paths(void) {
    Dl_info info;
    void *warm[2];
    char *real;
    if (dladdr((void *)&remember_paths, &info) && info.dli_fname) {
        real = realpath(info.dli_fname, NULL); /* /proc/self/maps names the real file */
        snprintf(g_self_path, sizeof g_self_path, "%s", real ? real : info.dli_fname);
        free(real);
    }
    backtrace(warm, 2); /* loads the unwinder now, not inside a CUDA callback */
}

static const CUpti_ActivityKind KINDS[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME,
    CUPTI_ACTIVITY_KIND_DRIVER};

static void undo_cupti(int nkinds) {
    int i;
    for (i = 0; i < nkinds; i++) p_cuptiActivityDisable(KINDS[i]);
    if (g_subscribed) {
        p_cuptiUnsubscribe(g_sub);
        g_subscribed = 0;
    }
}

static void subscribe(void) {
    CUptiResult st = p_cuptiSubscribe(&g_sub, on_callback, NULL);
    uint32_t cbid, launches = 0;
    if (st != CUPTI_SUCCESS) {
        health_set(H_NO_SUBSCRIBER);
        emit_note(&g_ch, 1, "cuptiSubscribe failed (%s): %s", cupti_err(st),
                  st == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                      ? "another CUPTI subscriber holds the callbacks; no MODULE records "
                        "and no launch counting"
                      : "no MODULE records and no launch counting");
        return;
    }
    g_subscribed = 1;
    st = p_cuptiEnableCallback(1, g_sub, CUPTI_CB_DOMAIN_RESOURCE,
                               CUPTI_CBID_RESOURCE_MODULE_LOADED);
    if (st != CUPTI_SUCCESS) {
        health_set(H_NO_SUBSCRIBER);
        emit_note(&g_ch, 1, "enabling the MODULE_LOADED callback failed: %s", cupti_err(st));
    }
    for (cbid = 1; cbid < CUPTI_DRIVER_TRACE_CBID_SIZE + 256u; cbid++) {
        const char *name = NULL;
        if (p_cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &name) != CUPTI_SUCCESS ||
            !name || !strstr(name, "Launch"))
            continue;
        if (p_cuptiEnableCallback(1, g_sub, CUPTI_CB_DOMAIN_DRIVER_API, cbid) == CUPTI_SUCCESS)
            launches++;
    }
    if (!launches) emit_note(&g_ch, 1, "no driver launch callback could be enabled");
}

CGOBS_API const char *cgobs_last_error(void) { return g_err; }

/* CUPTI time = CLOCK_MONOTONIC when the library lets us say so (CUPTI 12+): GPU times then
 * need no mapping onto the parent's clock and cannot drift from it (NTP slews REALTIME).
 * The clock pairs keep being sent: the parent's map then finds a zero offset. */
static uint64_t CUPTIAPI mono_clock_cb(void) { return mono_ns(); }

static void register_mono_clock(void *cupti) {
    typedef CUptiResult (*reg_t)(uint64_t (CUPTIAPI *)(void));
    reg_t reg = (reg_t)dlsym(cupti, "cuptiActivityRegisterTimestampCallback");
    if (!reg || reg(mono_clock_cb) != CUPTI_SUCCESS)
        emit_note(&g_ch, 1, "CUPTI keeps its own clock: GPU times are mapped through clock pairs");
}

CGOBS_API int cgobs_start(int key_fd, int out_fd, int ctl_fd, const char *cupti_path,
                          unsigned flags) {
    void *h;
    uint32_t version = 0;
    int nk = 0, nkinds, rc;
    CUptiResult st;
    clock_pair cp;
    buf_t r = {0};

    pthread_mutex_lock(&g_start_lock);
    if (g_started) {
        pthread_mutex_unlock(&g_start_lock);
        return fail(-1, "the observer was already started (or failed to start) in this process");
    }
    g_started = -1;
    pthread_mutex_unlock(&g_start_lock);

    if (flags & ~CGOBS_START_NO_API) return fail(-1, "unknown flags 0x%x", flags);
    if ((rc = load_key(&g_ch, key_fd))) return rc;
    if (!cupti_path || !*cupti_path) return fail(-3, "no libcupti path given");
    dlerror();
    h = dlopen(cupti_path, RTLD_NOW | RTLD_GLOBAL);
    if (!h) return fail(-3, "dlopen(%s) failed: %s", cupti_path, dlerror());
#define LOAD_PTR(name)                                                                      \
    p_##name = (__typeof__(name) *)dlsym(h, #name);                                         \
    if (!p_##name) return fail(-3, "%s has no symbol %s", cupti_path, #name);
    CUPTI_FUNCS(LOAD_PTR)
#undef LOAD_PTR
    g_use_cupti = 1;
    st = p_cuptiGetVersion(&version);
    if (st != CUPTI_SUCCESS) return fail(-4, "cuptiGetVersion failed: %s", cupti_err(st));
    if (version && version / 10000 != CUPTI_API_VERSION / 10000)
        return fail(-4, "libcupti at %s has API version %u; this observer was built for %u "
                    "(the activity record layouts differ)", cupti_path, version,
                    (unsigned)CUPTI_API_VERSION);

    g_ch.fd = out_fd;
    g_ctl_fd = ctl_fd;
    remember_paths();

    register_mono_clock(h); /* before the first clock pair: every pair then uses one clock */
    sample_clock(&cp); /* a zero CUPTI time here is re-checked once activity is on */
    encode_hello(&r, (uint16_t)((flags & CGOBS_START_NO_API) ? HELLO_NO_API : 0), version, &cp);
    emit_one(&g_ch, &r);
    free(r.p);
    if (!version) emit_note(&g_ch, 1, "cuptiGetVersion reported 0; layouts assumed to be %u's",
                            (unsigned)CUPTI_API_VERSION);

    st = p_cuptiActivityRegisterCallbacks(on_buffer_requested, on_buffer_completed);
    if (st != CUPTI_SUCCESS)
        return fail(-5, "cuptiActivityRegisterCallbacks failed: %s (is there a GPU and a CUDA "
                    "driver?)", cupti_err(st));
    nkinds = (flags & CGOBS_START_NO_API) ? 4 : 6;
    for (nk = 0; nk < nkinds; nk++) {
        st = p_cuptiActivityEnable(KINDS[nk]);
        if (st != CUPTI_SUCCESS) {
            undo_cupti(nk);
            return fail(-5, "cuptiActivityEnable(kind %d) failed: %s (is there a GPU and a "
                        "CUDA driver?)", (int)KINDS[nk], cupti_err(st));
        }
    }
    subscribe();
    sample_clock(&cp);
    if (cp.cupti_ns == 0)
        emit_note(&g_ch, 2, "cuptiGetTimestamp returns 0: GPU times cannot be mapped to the "
                  "host clock");
    if ((rc = start_flusher()) != 0) {
        undo_cupti(nkinds);
        return fail(-6, "could not start the flusher thread: %s", strerror(rc));
    }
    g_started = 1;
    g_err[0] = 0;
    return 0;
}

/* ======================================================================================= */
/* Selftest                                                                                 */

/*
 * The fixed sequence (cgobs_selftest), frame by frame:
 *   seq 0: HELLO   version 1, flags SELFTEST, pid getpid(), cupti_version 0,
 *                  clock (1000000, 2000000, 7)
 *   seq 1: KERNEL  start 1000, end 3000, completed 3000, correlation 7, stream 13, device 0,
 *                  context 1, grid (4,2,1), block (128,1,1), registers 32, static 1024,
 *                  dynamic 2048, graph 0, graph node 0, flags 0, "cutegen_selftest_kernel"
 *          MEMCPY  start 4000, end 5000, correlation 8, stream 13, bytes 4096, HtoD (1),
 *                  src PAGEABLE (1), dst DEVICE (3), flags 0, devices 0/0/0, graph 0
 *          MEMSET  start 6000, end 6500, correlation 9, stream 14, bytes 268435456,
 *                  value 0, device 0, graph 0
 *          API     driver (1), cbid 307, start 900, end 1100, correlation 7, thread 4242,
 *                  process 4241, return 0, "cuLaunchKernel"
 *   seq 2: MODULE  module 5, cubin = the 22 bytes "cutegen-selftest-cubin" (size 22, its
 *                  sha256), t 7000, mono 7500, thread 4242, flags NOT_ELF, origin
 *                  "<anonymous>", chain ["libcuda.so.1", "<anonymous>"], no kernel names
 *          NOTE    level 1, "selftest note: caf\u00e9" (UTF-8)
 *   seq 3: FLUSHED nonce 00 01 .. 0f, clock (8000, 123456789, 5), dropped 3,
 *                  records_total 7, launch_calls 1, health 0
 * cgobs_selftest_start sends frames 0 to 2 (with its real pid and clock in HELLO), then a
 * MODULE record made by the real callback code for the same 22-byte image (module 6, its
 * real time, thread and origin: the caller of cgobs_selftest_start), then one FLUSHED per
 * nonce read from ctl_fd.
 */
static void selftest_records(chan_t *ch, int with_flushed, const clock_pair *hello_clock) {
    static const char cubin[] = "cutegen-selftest-cubin";
    CUpti_ModuleResourceData md;
    batch_t bt;
    buf_t r = {0};
    size_t at;
    uint8_t digest[32];
    sha256_ctx c;
    int i;

    batch_init(&bt, ch);
    encode_hello(&r, HELLO_SELFTEST, 0, hello_clock);
    batch_add(&bt, &r);
    batch_emit(&bt);

    r.len = 0;
    at = rec_begin(&r, REC_KERNEL);
    b_u64(&r, 1000); b_u64(&r, 3000); b_u64(&r, 3000);
    b_u32(&r, 7); b_u32(&r, 13); b_u32(&r, 0); b_u32(&r, 1);
    b_i32(&r, 4); b_i32(&r, 2); b_i32(&r, 1); b_i32(&r, 128); b_i32(&r, 1); b_i32(&r, 1);
    b_u16(&r, 32); b_i32(&r, 1024); b_i32(&r, 2048); b_u32(&r, 0); b_u64(&r, 0); b_u8(&r, 0);
    b_str16(&r, "cutegen_selftest_kernel", CGOBS_NAME_CAP);
    rec_end(&r, at);
    batch_add(&bt, &r);

    r.len = 0;
    at = rec_begin(&r, REC_MEMCPY);
    b_u64(&r, 4000); b_u64(&r, 5000); b_u32(&r, 8); b_u32(&r, 13); b_u64(&r, 4096);
    b_u8(&r, 1); b_u8(&r, 1); b_u8(&r, 3); b_u8(&r, 0);
    b_u32(&r, 0); b_u32(&r, 0); b_u32(&r, 0); b_u32(&r, 0);
    rec_end(&r, at);
    batch_add(&bt, &r);

    r.len = 0;
    at = rec_begin(&r, REC_MEMSET);
    b_u64(&r, 6000); b_u64(&r, 6500); b_u32(&r, 9); b_u32(&r, 14); b_u64(&r, 268435456ull);
    b_u32(&r, 0); b_u32(&r, 0); b_u32(&r, 0);
    rec_end(&r, at);
    batch_add(&bt, &r);

    r.len = 0;
    at = rec_begin(&r, REC_API);
    b_u8(&r, 1); b_u32(&r, 307); b_u64(&r, 900); b_u64(&r, 1100);
    b_u32(&r, 7); b_u32(&r, 4242); b_u32(&r, 4241); b_u32(&r, 0);
    b_str16(&r, "cuLaunchKernel", CGOBS_NAME_CAP);
    rec_end(&r, at);
    batch_add(&bt, &r);
    batch_emit(&bt);

    /* MODULE through the real parser and hash (a non-ELF image) */
    md.moduleId = 5;
    md.cubinSize = sizeof cubin - 1;
    md.pCubin = cubin;
    r.len = 0;
    at = rec_begin(&r, REC_MODULE);
    sha256_init(&c); sha256_update(&c, md.pCubin, md.cubinSize); sha256_final(&c, digest);
    b_u32(&r, md.moduleId); b_u64(&r, md.cubinSize); b_put(&r, digest, 32);
    b_u64(&r, 7000); b_u64(&r, 7500); b_u32(&r, 4242);
    {
        names_rec nr;
        buf_t scratch = {0};
        nr.b = &scratch; nr.count = 0; nr.cut = 0;
        b_u32(&r, elf_walk((const uint8_t *)md.pCubin, md.cubinSize, sink_record, &nr));
        free(scratch.p);
    }
    b_str16(&r, "<anonymous>", CGOBS_SHORT_CAP);
    b_u16(&r, 2);
    b_str16(&r, "libcuda.so.1", CGOBS_SHORT_CAP);
    b_str16(&r, "<anonymous>", CGOBS_SHORT_CAP);
    b_u32(&r, 0);
    rec_end(&r, at);
    batch_add(&bt, &r);

    r.len = 0;
    encode_note(&r, 1, "selftest note: caf\xc3\xa9");
    batch_add(&bt, &r);
    batch_emit(&bt);

    if (with_flushed) {
        uint8_t nonce[16];
        clock_pair cp = {8000, 123456789, 5};
        for (i = 0; i < 16; i++) nonce[i] = (uint8_t)i;
        emit_flushed(ch, nonce, &cp, 3, 1, 0);
    }
    batch_free(&bt);
    free(r.p);
}

CGOBS_API int cgobs_selftest(int key_fd, int out_fd) {
    chan_t ch;
    clock_pair hello = {1000000, 2000000, 7};
    int rc, dead;
    memset(&ch, 0, sizeof ch);
    pthread_mutex_init(&ch.lock, NULL);
    if ((rc = load_key(&ch, key_fd))) return rc;
    ch.fd = out_fd;
    selftest_records(&ch, 1, &hello);
    dead = ch.dead;
    wipe(&ch.key, sizeof ch.key);
    pthread_mutex_destroy(&ch.lock);
    return dead ? fail(-7, "writing to fd %d failed", out_fd) : 0;
}

CGOBS_API int cgobs_selftest_start(int key_fd, int out_fd, int ctl_fd) {
    clock_pair cp;
    int rc;
    pthread_mutex_lock(&g_start_lock);
    if (g_started) {
        pthread_mutex_unlock(&g_start_lock);
        return fail(-1, "the observer was already started (or failed to start) in this process");
    }
    g_started = -1;
    pthread_mutex_unlock(&g_start_lock);
    if ((rc = load_key(&g_ch, key_fd))) return rc;
    g_use_cupti = 0;
    g_ch.fd = out_fd;
    g_ctl_fd = ctl_fd;
    remember_paths();
    sample_clock(&cp);
    selftest_records(&g_ch, 0, &cp);
    {
        static const char cubin[] = "cutegen-selftest-cubin";
        CUpti_ModuleResourceData md;
        buf_t r = {0};
        md.moduleId = 6;
        md.cubinSize = sizeof cubin - 1;
        md.pCubin = cubin;
        encode_module(&r, &md);
        emit_one(&g_ch, &r);
        free(r.p);
    }
    if ((rc = start_flusher()) != 0)
        return fail(-6, "could not start the flusher thread: %s", strerror(rc));
    g_started = 2;
    return 0;
}

/* ======================================================================================= */
/* Test entry points: hashes and the cubin parser                                           */

CGOBS_API int cgobs_sha256(const void *data, size_t len, unsigned char out[32]) {
    sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, data, len);
    sha256_final(&c, out);
    return 0;
}

CGOBS_API int cgobs_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len,
                                unsigned char out[32]) {
    hmac_key k;
    hmac_setkey(&k, (const uint8_t *)key, key_len);
    hmac_two(&k, msg, msg_len, NULL, 0, out);
    wipe(&k, sizeof k);
    return 0;
}

CGOBS_API long cgobs_elf_kernel_names(const void *image, size_t len, char *out, size_t cap,
                                      unsigned *flags) {
    names_flat nf;
    unsigned f;
    nf.out = out; nf.cap = out ? cap : 0; nf.used = 0; nf.count = 0; nf.overflow = 0;
    f = elf_walk((const uint8_t *)image, len, sink_flat, &nf);
    if (flags) *flags = f;
    return nf.overflow ? -1 : nf.count;
}

/* ======================================================================================= */
/* Lockdown: a seccomp-bpf filter                                                           */

#if defined(__x86_64__)

/*
 * What the filter does (x86-64 only; any other architecture's syscall kills the process):
 *   EPERM:  fork, vfork, execve, execveat, ptrace, process_vm_readv, process_vm_writev,
 *           kcmp, pidfd_send_signal, pidfd_getfd, process_madvise, io_uring_setup/enter/
 *           register (io_uring could open sockets behind the socket rule), every x32 call;
 *           clone without CLONE_THREAD in its flags (new processes; threads still work);
 *           socket for any family but AF_UNIX;
 *           kill, tkill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo and pidfd_open whose
 *           first argument is not this process's pid (0 and negative pids included).
 *   ENOSYS: clone3, whose flags live in memory a filter cannot read; glibc then falls back
 *           to clone for threads.
 * It is installed on every thread (SECCOMP_FILTER_FLAG_TSYNC) after PR_SET_NO_NEW_PRIVS.
 *
 * Before it, two steps that a syscall filter cannot take (open() paths are out of its
 * reach): PR_SET_DUMPABLE 0, so that no other process of the same user (a sibling worker
 * with another candidate) can open this one's /proc/PID/mem or /proc/PID/fd; and dropping
 * the calling thread's capabilities (bounding, ambient, effective, permitted, inheritable;
 * threads started afterwards inherit that), so that a worker running as root cannot use
 * CAP_SYS_PTRACE or CAP_DAC_OVERRIDE on its parent or its siblings either. Threads that
 * existed before keep their capabilities: capabilities are per thread.
 */

#define MAX_INSNS 96
enum { L_ALLOW, L_EPERM, L_ENOSYS, L_CLONE, L_SOCKET, L_PID, L_COUNT };

typedef struct {
    struct sock_filter f[MAX_INSNS];
    int n;
    int label_at[L_COUNT];
    int fix_at[MAX_INSNS]; /* jump instruction -> label for jt (or -1) */
    int fix_label[MAX_INSNS];
} prog_t;

static void emit_stmt(prog_t *p, uint16_t code, uint32_t k) {
    struct sock_filter s = BPF_STMT(code, k);
    if (p->n < MAX_INSNS) { p->fix_label[p->n] = -1; p->f[p->n++] = s; }
}

/* if (A == k) goto label */
static void emit_jeq_label(prog_t *p, uint32_t k, int label) {
    struct sock_filter s = BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, k, 0, 0);
    if (p->n < MAX_INSNS) { p->fix_label[p->n] = label; p->f[p->n++] = s; }
}

static void mark(prog_t *p, int label) { p->label_at[label] = p->n; }

static int resolve(prog_t *p) {
    int i;
    if (p->n >= MAX_INSNS) return -1;
    for (i = 0; i < p->n; i++) {
        int to, off;
        if (p->fix_label[i] < 0) continue;
        to = p->label_at[p->fix_label[i]];
        off = to - (i + 1);
        if (to < 0 || off < 0 || off > 255) return -1;
        p->f[i].jt = (uint8_t)off;
    }
    return 0;
}

#define ARCH_OFF ((uint32_t)offsetof(struct seccomp_data, arch))
#define NR_OFF ((uint32_t)offsetof(struct seccomp_data, nr))
#define ARG0_LO ((uint32_t)offsetof(struct seccomp_data, args[0]))

static int build_filter(prog_t *p, uint32_t pid) {
    static const int deny[] = {
        SYS_fork, SYS_vfork, SYS_execve, SYS_execveat, SYS_ptrace, SYS_process_vm_readv,
        SYS_process_vm_writev, SYS_kcmp,
#ifdef SYS_pidfd_send_signal
        SYS_pidfd_send_signal,
#endif
#ifdef SYS_pidfd_getfd
        SYS_pidfd_getfd,
#endif
#ifdef SYS_process_madvise
        SYS_process_madvise,
#endif
#ifdef SYS_io_uring_setup
        SYS_io_uring_setup, SYS_io_uring_enter, SYS_io_uring_register,
#endif
    };
    static const int pid_checked[] = {
        SYS_kill, SYS_tkill, SYS_tgkill, SYS_rt_sigqueueinfo, SYS_rt_tgsigqueueinfo,
#ifdef SYS_pidfd_open
        SYS_pidfd_open,
#endif
    };
    size_t i;
    memset(p, 0, sizeof *p);
    for (i = 0; i < L_COUNT; i++) p->label_at[i] = -1;
    emit_stmt(p, BPF_LD | BPF_W | BPF_ABS, ARCH_OFF);
    {
        struct sock_filter s = BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
        p->fix_label[p->n] = -1;
        p->f[p->n++] = s;
    }
    emit_stmt(p, BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
    emit_stmt(p, BPF_LD | BPF_W | BPF_ABS, NR_OFF);
    {
        /* x32 calls (nr | 0x40000000): deny them all */
        struct sock_filter s = BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 0);
        p->fix_label[p->n] = L_EPERM;
        p->f[p->n++] = s;
    }
    for (i = 0; i < sizeof deny / sizeof deny[0]; i++)
        emit_jeq_label(p, (uint32_t)deny[i], L_EPERM);
#ifdef SYS_clone3
    emit_jeq_label(p, SYS_clone3, L_ENOSYS);
#endif
    emit_jeq_label(p, SYS_clone, L_CLONE);
    emit_jeq_label(p, SYS_socket, L_SOCKET);
    for (i = 0; i < sizeof pid_checked / sizeof pid_checked[0]; i++)
        emit_jeq_label(p, (uint32_t)pid_checked[i], L_PID);
    emit_stmt(p, BPF_RET | BPF_K, SECCOMP_RET_ALLOW);

    mark(p, L_CLONE);
    emit_stmt(p, BPF_LD | BPF_W | BPF_ABS, ARG0_LO);
    {
        struct sock_filter s = BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 0, 0);
        p->fix_label[p->n] = L_ALLOW;
        p->f[p->n++] = s;
    }
    emit_stmt(p, BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA));

    mark(p, L_SOCKET);
    emit_stmt(p, BPF_LD | BPF_W | BPF_ABS, ARG0_LO);
    emit_jeq_label(p, AF_UNIX, L_ALLOW);
    emit_stmt(p, BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA));

    mark(p, L_PID);
    emit_stmt(p, BPF_LD | BPF_W | BPF_ABS, ARG0_LO);
    emit_jeq_label(p, pid, L_ALLOW);
    emit_stmt(p, BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA));

    mark(p, L_ALLOW);
    emit_stmt(p, BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    mark(p, L_EPERM);
    emit_stmt(p, BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA));
    mark(p, L_ENOSYS);
    emit_stmt(p, BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA));
    return resolve(p);
}

static int drop_capabilities(void) {
    struct __user_cap_header_struct hdr;
    struct __user_cap_data_struct data[2];
    int cap;
#ifdef PR_CAP_AMBIENT
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
        return fail(-12, "clearing the ambient capabilities failed: %s", strerror(errno));
#endif
    for (cap = 0; cap < 64; cap++) {
        if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) <= 0) continue; /* absent or beyond the last */
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EPERM)
            return fail(-12, "dropping capability %d from the bounding set failed: %s", cap,
                        strerror(errno));
    }
    memset(&hdr, 0, sizeof hdr);
    memset(data, 0, sizeof data);
    hdr.version = _LINUX_CAPABILITY_VERSION_3;
    hdr.pid = 0;
    if (syscall(SYS_capset, &hdr, data) != 0)
        return fail(-12, "capset (dropping every capability) failed: %s", strerror(errno));
    return 0;
}

CGOBS_API int cgobs_lockdown(unsigned flags) {
    prog_t p;
    struct sock_fprog fp;
    long rc;
    int err;
    if (flags & ~(CGOBS_LOCK_KEEP_CAPS | CGOBS_LOCK_KEEP_DUMPABLE))
        return fail(-1, "unknown flags 0x%x", flags);
    if (build_filter(&p, (uint32_t)getpid())) return fail(-8, "the seccomp program did not fit");
    if (!(flags & CGOBS_LOCK_KEEP_DUMPABLE) && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
        return fail(-12, "prctl(PR_SET_DUMPABLE, 0) failed: %s", strerror(errno));
    if (!(flags & CGOBS_LOCK_KEEP_CAPS) && (err = drop_capabilities()) != 0) return err;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return fail(-9, "prctl(PR_SET_NO_NEW_PRIVS) failed: %s", strerror(errno));
    fp.len = (unsigned short)p.n;
    fp.filter = p.f;
    rc = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &fp);
    if (rc < 0)
        return fail(-10, "seccomp(SET_MODE_FILTER, TSYNC) failed: %s", strerror(errno));
    if (rc > 0)
        return fail(-10, "seccomp TSYNC failed: thread %ld could not take the filter", rc);
    return 0;
}

#else

CGOBS_API int cgobs_lockdown(unsigned flags) {
    (void)flags;
    return fail(-11, "lockdown is only implemented for x86-64");
}

#endif

/* ======================================================================================= */
/* CUDA IPC for the evaluator's data path                                                   */
/*
 * The reference worker writes each call's inputs into device buffers that the candidate
 * worker maps, and maps the candidate's outputs to read them in place (no host copies).
 * These three functions wrap the driver API found in the libcuda already loaded by torch,
 * so no Python code needs to read a handle's bytes through ctypes pointers (which the
 * candidate worker's sandbox denies).
 *
 *   cgobs_ipc_export(dptr, handle[64], &base, &size): the IPC handle of the allocation
 *       holding device address dptr, with that allocation's base and size;
 *   cgobs_ipc_open(handle[64], &base, &size): map another process's allocation;
 *   cgobs_ipc_close(base): unmap it.
 */

typedef int (*cu_range_t)(unsigned long long *, size_t *, unsigned long long);
typedef int (*cu_get_t)(void *, unsigned long long);
typedef int (*cu_open_t)(unsigned long long *, CUipcMemHandle, unsigned int);
typedef int (*cu_close_t)(unsigned long long);

static struct {
    int loaded;
    cu_range_t range;
    cu_get_t get;
    cu_open_t open;
    cu_close_t close;
} g_ipc;

static int ipc_load(void) {
    void *h;
    if (g_ipc.loaded) return 0;
    h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h) h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) return fail(-3, "libcuda.so.1 is not loaded: %s", dlerror());
    g_ipc.range = (cu_range_t)dlsym(h, "cuMemGetAddressRange_v2");
    g_ipc.get = (cu_get_t)dlsym(h, "cuIpcGetMemHandle");
    g_ipc.open = (cu_open_t)dlsym(h, "cuIpcOpenMemHandle_v2");
    g_ipc.close = (cu_close_t)dlsym(h, "cuIpcCloseMemHandle");
    if (!g_ipc.range || !g_ipc.get || !g_ipc.open || !g_ipc.close)
        return fail(-3, "libcuda.so.1 lacks the IPC entry points");
    g_ipc.loaded = 1;
    return 0;
}

CGOBS_API int cgobs_ipc_export(unsigned long long dptr, unsigned char handle[64],
                               unsigned long long *base, unsigned long long *size) {
    CUipcMemHandle h;
    size_t sz = 0;
    int rc;
    if ((rc = ipc_load())) return rc;
    if ((rc = g_ipc.range(base, &sz, dptr)) != 0)
        return fail(-7, "cuMemGetAddressRange(0x%llx) failed: error %d", dptr, rc);
    *size = sz;
    if ((rc = g_ipc.get(&h, *base)) != 0)
        return fail(-7, "cuIpcGetMemHandle failed: error %d (memory that is not a plain "
                    "device allocation of this process cannot be exported)", rc);
    memcpy(handle, &h, 64);
    return 0;
}

CGOBS_API int cgobs_ipc_open(const unsigned char handle[64], unsigned long long *base,
                             unsigned long long *size) {
    CUipcMemHandle h;
    unsigned long long b = 0, rb = 0;
    size_t sz = 0;
    int rc;
    if ((rc = ipc_load())) return rc;
    memcpy(&h, handle, 64);
    if ((rc = g_ipc.open(&b, h, 1 /* CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS */)) != 0)
        return fail(-7, "cuIpcOpenMemHandle failed: error %d", rc);
    if ((rc = g_ipc.range(&rb, &sz, b)) != 0) {
        g_ipc.close(b);
        return fail(-7, "cuMemGetAddressRange on a mapped handle failed: error %d", rc);
    }
    *base = rb;
    *size = sz;
    return 0;
}

CGOBS_API int cgobs_ipc_close(unsigned long long base) {
    int rc;
    if ((rc = ipc_load())) return rc;
    rc = g_ipc.close(base);
    return rc ? fail(-7, "cuIpcCloseMemHandle failed: error %d", rc) : 0;
}
