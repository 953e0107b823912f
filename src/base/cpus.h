/*
 * cpus: how many threads a parallel step starts.
 */
#ifndef TB_CPUS_H
#define TB_CPUS_H

/* asked when positive (the user's --threads), else the online CPUs (at
 * least 1). */
int tb_threads_for(int asked);

#endif
