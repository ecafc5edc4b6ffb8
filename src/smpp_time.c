/* smpp_time.c: SMPP 3.4 time strings: absolute with a quarter-hour offset, and relative. */
#include "smpp_time.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* n digits at s as a number; -1 if any is not a digit. */
static int
digits(const char *s, int n)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

static bool
leap(int y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int
month_days(int y, int m)
{
	static const int days[12] = {
		31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31
	};

	return m == 2 && leap(y) ? 29 : days[m - 1];
}

/* Days since 1970-01-01 of a date in the proleptic Gregorian calendar. */
static int64_t
days_from_civil(int64_t y, int m, int d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

int
smpp_time_parse(const char *s, uint64_t now, uint64_t *out)
{
	int f[6], tenths, nn;
	int64_t t;

	*out = 0;
	if (s[0] == '\0')
		return 0;
	if (strlen(s) != 16)
		return -1;
	for (int i = 0; i < 6; i++)
		if ((f[i] = digits(s + 2 * i, 2)) < 0)
			return -1;
	if ((tenths = digits(s + 12, 1)) < 0 || (nn = digits(s + 13, 2)) < 0)
		return -1;
	if (s[15] == 'R') {
		/* Amounts, not a date: added to now, by the calendar. */
		struct tm tm;
		time_t base = (time_t)now;
		int64_t mon;

		if (tenths != 0 || nn != 0)
			return -1;
		gmtime_r(&base, &tm);
		mon = (int64_t)tm.tm_mon + f[1] + 12 * ((int64_t)f[0]);
		int64_t y = tm.tm_year + 1900 + mon / 12;
		int m = (int)(mon % 12) + 1;
		int d = tm.tm_mday;

		if (d > month_days((int)y, m))
			d = month_days((int)y, m);
		t = days_from_civil(y, m, d) * 86400 + tm.tm_hour * 3600 +
		    tm.tm_min * 60 + tm.tm_sec;
		t += (int64_t)f[2] * 86400 + f[3] * 3600 + f[4] * 60 + f[5];
		*out = (uint64_t)t;
		return 0;
	}
	if (s[15] != '+' && s[15] != '-')
		return -1;
	int y = 2000 + f[0];
	if (f[1] < 1 || f[1] > 12 || f[2] < 1 || f[2] > month_days(y, f[1]) ||
	    f[3] > 23 || f[4] > 59 || f[5] > 59 || nn > 48)
		return -1;
	t = days_from_civil(y, f[1], f[2]) * 86400 + f[3] * 3600 + f[4] * 60 +
	    f[5];
	/* Local time nn quarter hours ahead of UTC: UTC is earlier. */
	t += (s[15] == '+' ? -1 : 1) * (int64_t)nn * 900;
	if (t <= 0)
		return -1;
	*out = (uint64_t)t;
	return 0;
}

void
smpp_time_format(uint64_t t, char *out)
{
	time_t tt = (time_t)t;
	struct tm tm;
	char buf[64];

	out[0] = '\0';
	if (t == 0 || gmtime_r(&tt, &tm) == NULL)
		return;
	snprintf(buf, sizeof(buf), "%02d%02d%02d%02d%02d%02d000+",
	    tm.tm_year % 100, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
	    tm.tm_min, tm.tm_sec);
	memcpy(out, buf, 16);
	out[16] = '\0';
}
