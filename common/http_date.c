#include "common/http_date.h"

#include <string.h>

static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";

/* <w> decimal digits at <p> (all digits), or -1. */
static int64_t date_digits(const char *p, int w)
{
	int64_t v = 0;

	for (int i = 0; i < w; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -1;
		v = v * 10 + (p[i] - '0');
	}
	return v;
}

/* The month of "Jan".."Dec" at <p> (0..11), or -1. */
static int date_month(const char *p)
{
	for (int m = 0; m < 12; m++)
		if (!memcmp(p, months + 3 * m, 3))
			return m;
	return -1;
}

/* Days from 1970-01-01 to y-m-d (m 1..12), proleptic Gregorian (Howard
 * Hinnant's days_from_civil): no timegm(), which reads the TZ database. */
static int64_t date_days(int64_t y, int64_t m, int64_t d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;

	return era * 146097 + doe - 719468;
}

/* "HH:MM:SS" at <p> into seconds of the day, or -1. */
static int64_t date_clock(const char *p)
{
	int64_t h = date_digits(p, 2), mi = date_digits(p + 3, 2), s = date_digits(p + 6, 2);

	if (h < 0 || mi < 0 || s < 0 || p[2] != ':' || p[5] != ':' || h > 23 || mi > 59 || s > 60)
		return -1;
	return h * 3600 + mi * 60 + s;
}

static int64_t date_make(int64_t y, int m, int64_t d, int64_t clock)
{
	static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

	if (m < 0 || d < 1 || d > mdays[m] || clock < 0 || y < 1970)
		return -1;
	return date_days(y, m + 1, d) * 86400 + clock;
}

int64_t http_date_parse(const char *p, size_t n)
{
	const char *comma = memchr(p, ',', n);

	if (comma && n == 29 && comma == p + 3) {
		/* IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT" */
		if (p[4] != ' ' || p[7] != ' ' || p[11] != ' ' || p[16] != ' ' || memcmp(p + 25, " GMT", 4))
			return -1;
		return date_make(date_digits(p + 12, 4), date_month(p + 8), date_digits(p + 5, 2), date_clock(p + 17));
	}
	if (comma) {
		/* RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT"; a two-digit year
		 * more than 50 years ahead is in the past century (RFC 9110) */
		const char *q = comma + 1;
		size_t left = n - (size_t)(q - p);
		int64_t y;

		if (left != 23 || q[0] != ' ' || q[3] != '-' || q[7] != '-' || q[10] != ' ' || memcmp(q + 19, " GMT", 4))
			return -1;
		y = date_digits(q + 8, 2);
		if (y < 0)
			return -1;
		y += y < 70 ? 2000 : 1900;
		return date_make(y, date_month(q + 4), date_digits(q + 1, 2), date_clock(q + 11));
	}
	if (n == 24 && p[3] == ' ' && p[7] == ' ' && p[10] == ' ' && p[19] == ' ') {
		/* asctime: "Sun Nov  6 08:49:37 1994" (the day space-padded) */
		int64_t d = p[8] == ' ' ? date_digits(p + 9, 1) : date_digits(p + 8, 2);

		return date_make(date_digits(p + 20, 4), date_month(p + 4), d, date_clock(p + 11));
	}
	return -1;
}

int64_t http_retry_after(const char *p, size_t n, int64_t now)
{
	int64_t v = 0, at;
	size_t i;

	while (n && (*p == ' ' || *p == '\t'))
		p++, n--;
	while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
		n--;
	if (!n)
		return -1;
	for (i = 0; i < n && p[i] >= '0' && p[i] <= '9'; i++)
		if ((v = v * 10 + (p[i] - '0')) > INT32_MAX)
			v = INT32_MAX;
	if (i == n)
		return v;
	at = http_date_parse(p, n);
	if (at < 0)
		return -1;
	return at > now ? at - now : 0;
}
