/*
 * tls_bio.c: a socket BIO that reads ahead into a worker buffer (see
 * tls_bio.h).
 */
#include "worker/net/net.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/mem.h>

#include "worker/base/base.h"

/* A call for this many bytes or more is a record body BoringSSL wants
 * whole: reading it into BoringSSL's own buffer saves a copy, and at this
 * size one more recv(2) per record is small beside the record's cost. */
#define TLS_BIO_DIRECT 4096

/* Records one send(2) of a seal buffer carries, and the room each needs
 * beyond its plaintext (TLS 1.2's GCM nonce and tag with the header is 29,
 * TLS 1.3's 22; the rest is for a handshake message BoringSSL may send
 * before the first record, a session ticket say). Five records hold the
 * 64 KiB a stream buffer reads and the head beside it, or HTTP/2's
 * gathered write (H2_OUT_MIN). */
#define TLS_SEAL_RECORDS 5
#define TLS_SEAL_SLACK 64
#define TLS_SEAL_CAP (TLS_SEAL_RECORDS * (TLS_GATHER_MAX + TLS_SEAL_SLACK))

struct tls_bio {
	int fd;
	uint8_t corked;   /* writes go into <out>, not to the socket */
	uint8_t nrec;     /* records sealed into <out> ... */
	uint8_t first;    /* ... and the first not yet told written */
	uint8_t ahead;    /* read ahead into a stream buffer (tls_bio_read_ahead) */
	struct buf *in;   /* read ahead, not yet given to BoringSSL; NULL if none */
	struct buf *out;  /* sealed records not yet written; NULL if none */
	uint32_t ready;   /* plaintext of records written, not yet told */
	uint32_t rec_end[TLS_SEAL_RECORDS + 1]; /* where each record ends in <out> */
	uint32_t rec_len[TLS_SEAL_RECORDS + 1]; /* and the plaintext it carries */
};

static BIO_METHOD *tls_bio_method;
static int cls_seal = -1; /* seal buffers, TLS_SEAL_CAP bytes */

static int tls_bio_result(BIO *b, ssize_t n, int reading)
{
	if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		if (reading)
			BIO_set_retry_read(b);
		else
			BIO_set_retry_write(b);
	}
	return (int)n;
}

static int tls_bio_read(BIO *b, char *out, int len)
{
	struct tls_bio *s = BIO_get_data(b);
	struct buf *in = s->in;
	uint32_t take;

	BIO_clear_retry_flags(b);
	if (len <= 0)
		return 0;
	if (!in) {
		ssize_t n;

		/* no buffer to spare: read what was asked, as a plain BIO; a
		 * reader filling a stream buffer reads ahead as much, so that
		 * its records come in one recv(2), not one each */
		if (s->ahead && (in = buf_take_stream(wk.stream_size, STREAM_BUF_TLS_READ)))
			;
		else if (len >= TLS_BIO_DIRECT || !(in = buf_get()))
			return tls_bio_result(b, recv(s->fd, out, (size_t)len, 0), 1);
		n = recv(s->fd, in->data, in->cap, 0);
		if (n <= 0) {
			buf_put(in);
			return tls_bio_result(b, n, 1);
		}
		in->end = (uint32_t)n;
		s->in = in;
	}
	take = buf_len(in) < (uint32_t)len ? buf_len(in) : (uint32_t)len;
	memcpy(out, in->data + in->start, take);
	in->start += take;
	if (in->start == in->end) {
		buf_put(in);
		s->in = NULL;
	}
	return (int)take;
}

/* Writes what <s>'s seal buffer holds; moves the plaintext of each record
 * now wholly written into s->ready. 1 when the buffer is empty (and
 * given back once every record is told), 0 when the socket is full, -1 on
 * a socket error (errno). */
static int tls_bio_drain(struct tls_bio *s)
{
	struct buf *o = s->out;
	int rc = 1;

	while (buf_len(o)) {
		ssize_t n = send(s->fd, o->data + o->start, buf_len(o), MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = errno == EAGAIN ? 0 : -1;
			break;
		}
		o->start += (uint32_t)n;
	}
	while (s->first < s->nrec && s->rec_end[s->first] <= o->start)
		s->ready += s->rec_len[s->first++];
	if (rc == 1 && s->first == s->nrec) {
		buf_put(o);
		s->out = NULL;
		s->nrec = s->first = 0;
	}
	return rc;
}

static int tls_bio_write(BIO *b, const char *p, int len)
{
	struct tls_bio *s = BIO_get_data(b);
	struct buf *o = s->out;

	BIO_clear_retry_flags(b);
	if (s->corked) {
		if (o->cap - o->end < (uint32_t)len) {
			/* BoringSSL keeps the record and is retried with the
			 * same bytes once this buffer is out (tls_sendv) */
			BIO_set_retry_write(b);
			return -1;
		}
		memcpy(o->data + o->end, p, (size_t)len);
		o->end += (uint32_t)len;
		return len;
	}
	/* sealed records first, whoever writes now (an alert, a KeyUpdate
	 * answer): the byte order on the wire is the order of sealing */
	if (o && buf_len(o)) {
		int rc = tls_bio_drain(s);

		if (rc <= 0) {
			if (rc == 0)
				BIO_set_retry_write(b);
			return -1;
		}
	}
	return tls_bio_result(b, send(s->fd, p, (size_t)len, MSG_NOSIGNAL), 0);
}

static long tls_bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	struct tls_bio *s = BIO_get_data(b);
	(void)num;

	switch (cmd) {
	case BIO_CTRL_FLUSH:
		return 1;
	case BIO_CTRL_PENDING:
		return s && s->in ? (long)buf_len(s->in) : 0;
	case BIO_C_GET_FD:
		if (!s)
			return -1;
		if (ptr)
			*(int *)ptr = s->fd;
		return s->fd;
	default:
		return 0;
	}
}

static int tls_bio_destroy(BIO *b)
{
	struct tls_bio *s = BIO_get_data(b);

	if (!s)
		return 1;
	/* the socket is the connection's to close */
	if (s->in)
		buf_put(s->in);
	if (s->out)
		buf_put(s->out); /* sealed, never written: the connection is gone */
	OPENSSL_free(s);
	BIO_set_data(b, NULL);
	return 1;
}

int tls_bio_init(void)
{
	/* per worker: its own slab, taken only while a long write is out */
	cls_seal = slab_add_class(&wk.slab, sizeof(struct buf) + TLS_SEAL_CAP);
	if (tls_bio_method)
		return 0;
	tls_bio_method = BIO_meth_new(BIO_TYPE_SOCKET, "weir socket");
	if (!tls_bio_method || !BIO_meth_set_read(tls_bio_method, tls_bio_read) ||
	    !BIO_meth_set_write(tls_bio_method, tls_bio_write) || !BIO_meth_set_ctrl(tls_bio_method, tls_bio_ctrl) ||
	    !BIO_meth_set_destroy(tls_bio_method, tls_bio_destroy)) {
		tls_bio_cleanup();
		return -1;
	}
	return 0;
}

void tls_bio_cleanup(void)
{
	BIO_meth_free(tls_bio_method);
	tls_bio_method = NULL;
}

int tls_bio_attach(SSL *ssl, int fd)
{
	BIO *b = BIO_new(tls_bio_method);
	struct tls_bio *s = OPENSSL_malloc(sizeof(*s));

	if (!b || !s) {
		BIO_free(b);
		OPENSSL_free(s);
		return -1;
	}
	memset(s, 0, sizeof(*s));
	s->fd = fd;
	BIO_set_data(b, s);
	BIO_set_init(b, 1);
	/* one BIO both ways: SSL_set_bio takes the single reference */
	SSL_set_bio(ssl, b, b);
	return 0;
}

int tls_bio_pending(const SSL *ssl)
{
	const struct tls_bio *s = BIO_get_data(SSL_get_rbio(ssl));

	return SSL_has_pending(ssl) || (s && s->in);
}

static int tls_bio_owed(const SSL *ssl)
{
	const struct tls_bio *s = BIO_get_data(SSL_get_wbio(ssl));

	return s && (s->out || s->ready);
}

/* Tells up to <total> bytes of plaintext written, from s->ready. */
static size_t tls_bio_tell(struct tls_bio *s, size_t total)
{
	size_t n = s->ready < total ? s->ready : total;

	s->ready -= (uint32_t)n;
	return n;
}

/* Writes the sealed records still waiting. Returns the plaintext now wholly
 * out (at most <total>, the bytes the caller passes again), or -1 with
 * errno (EAGAIN when the socket is full). */
static ssize_t tls_bio_settle(SSL *ssl, size_t total)
{
	struct tls_bio *s = BIO_get_data(SSL_get_wbio(ssl));
	size_t n;

	if (s->out && tls_bio_drain(s) < 0)
		return -1;
	if ((n = tls_bio_tell(s, total)) == 0) {
		errno = EAGAIN;
		return -1;
	}
	return (ssize_t)n;
}

/* <want> bytes of <iov> from byte <at> of iovec <i>: in place when they lie
 * in that one iovec, else copied into <copy>. */
static const void *tls_bio_span(const struct iovec *iov, int cnt, int i, size_t at, size_t want, char *copy)
{
	size_t got = 0;

	if (iov[i].iov_len - at >= want)
		return (const char *)iov[i].iov_base + at;
	for (; i < cnt && got < want; i++, at = 0) {
		size_t k = iov[i].iov_len - at < want - got ? iov[i].iov_len - at : want - got;

		memcpy(copy + got, (const char *)iov[i].iov_base + at, k);
		got += k;
	}
	return copy;
}

/* Seals the <total> bytes of <iov> (more than a record, none owed) into at
 * most five records and writes them at once. Returns the plaintext wholly
 * out (> 0), or -1 with errno (EAGAIN: none wholly out yet; the caller
 * passes the same bytes again), or 0 when nothing was sealed: then *sslrc
 * is SSL_write's result, or 1 when no seal buffer could be had (past
 * limits.stream_buffers, or the slab is out) and a record goes alone. */
static ssize_t tls_sendv(SSL *ssl, const struct iovec *iov, int cnt, size_t total, int *sslrc)
{
	struct tls_bio *s = BIO_get_data(SSL_get_wbio(ssl));
	size_t overhead = SSL_max_seal_overhead(ssl) + TLS_SEAL_SLACK, sealed = 0, at = 0;
	char copy[TLS_GATHER_MAX];
	int i = 0, rc = 1;
	size_t n;

	*sslrc = 1;
	/* one per connection, held only while its records are out; none
	 * past limits.stream_buffers (what slow TLS clients may hold), and
	 * then a record at a time as before */
	if (cls_seal < 0 || wk.slab.classes[cls_seal].in_use >= wk.stream_max ||
	    !(s->out = buf_get_class(cls_seal, TLS_SEAL_CAP))) {
		SHM_ADD(wk.cnt, stream_buffers[STREAM_BUF_TLS_SEAL][1], 1);
		return 0;
	}
	SHM_ADD(wk.cnt, stream_buffers[STREAM_BUF_TLS_SEAL][0], 1);
	s->corked = 1;
	while (sealed < total && s->nrec < TLS_SEAL_RECORDS) {
		size_t room = s->out->cap - s->out->end, want = total - sealed;

		if (room <= overhead)
			break;
		if (want > TLS_GATHER_MAX)
			want = TLS_GATHER_MAX;
		if (want > room - overhead)
			want = room - overhead;
		rc = SSL_write(ssl, tls_bio_span(iov, cnt, i, at, want, copy), (int)want);
		if (rc <= 0)
			break;
		s->rec_end[s->nrec] = s->out->end;
		s->rec_len[s->nrec++] = (uint32_t)rc;
		sealed += (size_t)rc;
		for (at += (size_t)rc; i < cnt && at >= iov[i].iov_len; i++)
			at -= iov[i].iov_len;
	}
	s->corked = 0;
	if (s->nrec == 0) { /* nothing sealed: BoringSSL's answer is the caller's */
		buf_put(s->out);
		s->out = NULL;
		*sslrc = rc;
		return 0;
	}
	if (tls_bio_drain(s) < 0)
		return -1;
	if ((n = tls_bio_tell(s, total)) == 0) {
		errno = EAGAIN; /* the first record is not wholly out */
		return -1;
	}
	return (ssize_t)n;
}

void tls_bio_read_ahead(SSL *ssl, size_t room)
{
	struct tls_bio *s = BIO_get_data(SSL_get_rbio(ssl));

	s->ahead = room > wk.buf_size;
}

ssize_t tls_write(SSL *ssl, const struct iovec *iov, int cnt, int *sslrc)
{
	char copy[TLS_GATHER_MAX];
	const void *p;
	size_t len, total = 0;
	ssize_t n;

	for (int i = 0; i < cnt; i++)
		total += iov[i].iov_len;
	*sslrc = 1;
	if (tls_bio_owed(ssl))
		return tls_bio_settle(ssl, total);
	if (total > TLS_GATHER_MAX && (n = tls_sendv(ssl, iov, cnt, total, sslrc)) != 0)
		return n;
	if (*sslrc <= 0)
		return 0;
	len = tls_gather(iov, cnt, copy, sizeof(copy), &p);
	errno = 0; /* SSL_ERROR_SYSCALL with errno 0 is the peer's end */
	*sslrc = SSL_write(ssl, p, len > INT_MAX ? INT_MAX : (int)len);
	return *sslrc > 0 ? *sslrc : 0;
}
