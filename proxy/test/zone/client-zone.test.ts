import { describe, expect, it } from 'vitest';
import { RackMemory, zoneHintOf } from '../../src/zone/client-zone.js';

describe('zoneHintOf', () => {
  it.each([
    ['walproxy_az=zone-a', 'zone-a'],
    ['orders-app,walproxy_az=use1-az1', 'use1-az1'],
    ['orders walproxy_az=eu-west-1b;x=y', 'eu-west-1b'],
    ['walproxy_az=', undefined],
    ['my_walproxy_az=zone-a', undefined],
    ['producer-1', undefined],
    [null, undefined],
  ])('reads %j as %j', (clientId, zone) => {
    expect(zoneHintOf(clientId)).toBe(zone);
  });
});

describe('RackMemory', () => {
  it('remembers a zone per client address and client.id', () => {
    const memory = new RackMemory();
    memory.remember('10.0.0.1', 'consumer-1', 'zone-b');
    expect(memory.zoneOf('10.0.0.1', 'consumer-1')).toBe('zone-b');
    expect(memory.zoneOf('10.0.0.2', 'consumer-1')).toBeUndefined();
    expect(memory.zoneOf('10.0.0.1', 'consumer-2')).toBeUndefined();
    expect(memory.zoneOf(undefined, 'consumer-1')).toBeUndefined();
  });

  it('forgets the least recently taught client past its capacity', () => {
    const memory = new RackMemory(2);
    memory.remember('a', 'c', 'zone-a');
    memory.remember('b', 'c', 'zone-b');
    memory.remember('a', 'c', 'zone-c');
    memory.remember('d', 'c', 'zone-a');
    expect(memory.size).toBe(2);
    expect(memory.zoneOf('b', 'c')).toBeUndefined();
    expect(memory.zoneOf('a', 'c')).toBe('zone-c');
    expect(memory.zoneOf('d', 'c')).toBe('zone-a');
  });
});
