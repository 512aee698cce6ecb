/* Test plugin: a shared object WITHOUT parity_plugin_entry (parity must refuse it, exit 3). */
int parity_plugin_entry_misspelled(void);
int parity_plugin_entry_misspelled(void) { return 42; }
