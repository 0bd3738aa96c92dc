/* text/cpulist.h - the kernel's cpu lists ("0-3,8,10-11"), read by the library and the tools.
 *
 * lib/text/ holds parsers of the kernel's text formats that both sides
 * need: they depend on libc alone, include nothing of lib/, and are
 * compiled into libsmddp and into the tools' cmd/common/libtoolcommon.a
 * (as curl builds its lib/curlx/ into the curl tool), so that smddp-run,
 * which does not link libsmddp, and the topology discovery read a cpu
 * list the same way.
 */
#ifndef SD_TEXT_CPULIST_H
#define SD_TEXT_CPULIST_H

/* Walks a cpu list as /sys/devices/system/cpu/online or a node's cpulist
 * hold it ("0-3,8,10-11", a trailing newline allowed), calling fn for
 * each CPU in order.  0; -1 on a malformed list or when fn returns
 * non-zero, after fn was called for the CPUs before.  An empty list
 * has no CPUs. */
int sd_text_cpulist(const char *s, int (*fn)(void *arg, int cpu), void *arg);

#endif
