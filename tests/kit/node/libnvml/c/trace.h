/* What the NVML stand-in's C library records about its callers (test code only).
 *
 * Owns: the call log (every NVML call's name, when <driver root>/nvml-trace exists) and
 * what a call to an unimplemented NVML function does: NVML_ERROR_NOT_SUPPORTED, its name
 * noted once per process in <driver root>/nvml-unimplemented.log; in strict mode
 * (<driver root>/nvml-strict exists) a message on stderr and abort(), so a binary's real needs
 * cannot go unnoticed. Must not: change what an implemented call answers.
 */
#ifndef SIM_TRACE_H
#define SIM_TRACE_H

void sim_trace(const char *name);
int sim_unimplemented(const char *name);

#endif
