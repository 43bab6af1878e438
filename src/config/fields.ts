/** Field schemas the config file's sections share. */
import { z } from 'zod';
import {
  CIRCUIT_NAME_SEGMENT,
  DOT_SEGMENT_MESSAGE,
  SEGMENT_CHARS_MESSAGE,
  SEGMENT_MAX_LENGTH,
  isDotSegment,
} from '../domain/circuit-name.js';

/** An integer from 1 to `max`. */
export const positiveInt = (max: number) => z.number().int().min(1).max(max);

/** A data centre: one circuit-name segment. */
export const dcName = z.string().regex(CIRCUIT_NAME_SEGMENT, SEGMENT_CHARS_MESSAGE).max(SEGMENT_MAX_LENGTH);

/** A node id or upstream name: one circuit-name segment, never '.' or '..' (their circuit is `<upstream>/<node id>`). */
export const segmentName = z
  .string()
  .regex(CIRCUIT_NAME_SEGMENT, SEGMENT_CHARS_MESSAGE)
  .max(SEGMENT_MAX_LENGTH)
  .refine((s) => !isDotSegment(s), DOT_SEGMENT_MESSAGE);
