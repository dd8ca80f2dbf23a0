import { describe, expect, it } from 'vitest';
import { namesConfigFile } from '../../src/cli/config-file.js';

describe('namesConfigFile: whether yargs will read a config file, so its YAML parser must be loaded', () => {
  it('sees --config <file>, --config=<file> and WALPROXY_CONFIG', () => {
    expect(namesConfigFile(['sidecar', '--config', 'f.yaml'], {})).toBe(true);
    expect(namesConfigFile(['sidecar', '--config=f.yaml'], {})).toBe(true);
    expect(namesConfigFile(['sidecar'], { WALPROXY_CONFIG: 'f.yaml' })).toBe(true);
  });

  it('is false without them, for a similar flag, an empty variable, or a word after --', () => {
    expect(namesConfigFile(['sidecar', '--broker-id=1'], {})).toBe(false);
    expect(namesConfigFile(['sidecar', '--config-dir=x'], {})).toBe(false);
    expect(namesConfigFile(['sidecar'], { WALPROXY_CONFIG: '' })).toBe(false);
    expect(namesConfigFile(['sidecar', '--', '--config=f.yaml'], {})).toBe(false);
  });
});
