import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config.js';

const example = fs.readFileSync('examples/proxy.yaml', 'utf8');

describe('docs/proxy.md example', () => {
  it('shows examples/proxy.yaml exactly', () => {
    const doc = fs.readFileSync('docs/proxy.md', 'utf8');
    const block = /```yaml\n([\s\S]*?)```/.exec(doc)?.[1];
    expect(block).toBe(example);
  });

  it('is a valid config', () => {
    expect(() => parseConfigText(example, 'examples/proxy.yaml')).not.toThrow();
  });
});
