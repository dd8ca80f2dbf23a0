import { describe, expect, it } from 'vitest';
import {
  boolFlag,
  FlagErrors,
  flagText,
  hostPortFlag,
  parseBool,
  present,
} from '../../src/config/flag-values.js';

describe('flag values', () => {
  it('count a flag left out or set to nothing as unset', () => {
    for (const value of [undefined, null, '']) {
      expect(present(value)).toBe(false);
      expect(flagText({ x: value }, 'x')).toBeUndefined();
    }
    expect(present(0)).toBe(true);
    expect(present('false')).toBe(true);
  });

  it('read the last value of a flag given several times, and a YAML boolean as its word', () => {
    expect(flagText({ x: ['a', 'b'] }, 'x')).toBe('b');
    expect(flagText({ x: true }, 'x')).toBe('true');
    expect(flagText({ x: 42 }, 'x')).toBe('42');
  });

  it('take exactly true or false, as the help says, and name the flag of any other word', () => {
    expect(parseBool('true')).toBe(true);
    expect(parseBool('false')).toBe(false);
    const errors = new FlagErrors();
    expect(boolFlag({ a: 'TRUE', b: 'yes', c: ['true', 'false'], d: false }, 'a', errors)).toBeUndefined();
    expect(boolFlag({ b: 'yes' }, 'b', errors)).toBeUndefined();
    expect(boolFlag({ c: ['true', 'false'] }, 'c', errors)).toBe(false);
    expect(boolFlag({ d: false }, 'd', errors)).toBe(false);
    expect(boolFlag({}, 'e', errors)).toBeUndefined();
    expect(errors.list).toEqual(["--a: 'TRUE' is not true or false", "--b: 'yes' is not true or false"]);
  });

  it('report a line once however many settings share it', () => {
    const errors = new FlagErrors();
    expect(hostPortFlag({ x: 'nope' }, 'x', errors)).toBeUndefined();
    expect(hostPortFlag({ x: 'nope' }, 'x', errors)).toBeUndefined();
    expect(hostPortFlag({ y: '[::1]:9092' }, 'y', errors)).toEqual({ host: '::1', port: 9092 });
    expect(errors.list).toEqual(["--x: 'nope' is not host:port"]);
  });
});
