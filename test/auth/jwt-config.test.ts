import { describe, expect, it } from 'vitest';
import { SCOPES } from '../../src/auth/identity.js';
import { parseConfigText } from '../../src/config.js';
import { SCOPE_NAMES } from '../../src/config/auth-schema.js';

const jwtSection = (extra: string) =>
  `auth:\n  jwt:\n    jwks_file: /etc/circuitlog/jwks.json\n    issuer: https://kubernetes.default.svc.cluster.local\n    audience: circuitlog\n${extra}`;

describe('the config file: auth.jwt', () => {
  it('names the same scopes as src/auth/identity.ts', () => {
    expect([...SCOPE_NAMES]).toEqual([...SCOPES]);
  });

  it('gives scopes to identities by name and by pattern (auth.jwt.scopes), none by default', () => {
    const config = parseConfigText(
      jwtSection(
        '    scopes:\n      "system:serviceaccount:shop:checkout": [report, read]\n      "system:serviceaccount:ops:*": [operate]\n',
      ),
      'circuitlog.yaml',
    );
    expect(config.auth.jwt?.scopes).toEqual({
      'system:serviceaccount:shop:checkout': ['report', 'read'],
      'system:serviceaccount:ops:*': ['operate'],
    });
    expect(parseConfigText(jwtSection(''), 'c.yaml').auth.jwt?.scopes).toEqual({});
  });

  it("refuses a pattern with '*' before its end, and a word that is not a scope, naming the key", () => {
    expect(() => parseConfigText(jwtSection('    scopes:\n      "shop:*:x": [read]\n'), 'c.yaml')).toThrow(
      /c\.yaml auth\.jwt\.scopes\.shop:\*:x: an identity or a pattern ending in '\*'/,
    );
    expect(() => parseConfigText(jwtSection('    scopes:\n      "shop:x": [root]\n'), 'c.yaml')).toThrow(
      /c\.yaml auth\.jwt\.scopes\.shop:x\[0\]/,
    );
  });
});
